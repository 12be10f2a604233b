"""RewardClient (blocking) and AsyncRewardClient (asyncio): one RPC per batch, or, for a
fleet of replicas, one per replica (fleet/caller.py).

Each call has a deadline (`timeout`) that covers gRPC's retries of it;
transient failures are retried (see retry.py); a failure for good raises
RewardServerError naming the target.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .defaults import DEFAULT_TARGET, DEFAULT_TIMEOUT_S
from .errors import RewardServerError
from .fleet.caller import MAX_IN_FLIGHT_PER_REPLICA, AsyncFleetCaller, FleetCaller
from .fleet.calls import SPLIT_METHODS
from .pb import reward_pb2, reward_pb2_grpc
from .requests import Rubric, Rubrics, group_request, prepare_request, score_request
from .retry import Patience, RetryPolicy
from .transport import (
    MAX_MESSAGE_BYTES,
    Targets,
    TLSOptions,
    auth_metadata,
    channel_spec,
    is_fleet,
    open_aio_channel,
    open_channel,
)
from .types import GroupResult, ItemResult, Logprobs, ScoringMode, group_result, item_result

__all__ = ["AsyncRewardClient", "RewardClient", "MAX_MESSAGE_BYTES"]

log = logging.getLogger(__name__)

HEALTH_TIMEOUT_S = 5.0


class _ClientBase:
    """Options shared by both clients.

    target: "host:port" (one server); a list (or comma-separated string) of them, or a DNS
    name such as "dns:///judges:50051" (a fleet: each call is cut prompt by prompt over the
    replicas, see docs/fleet.md); or another gRPC target, such as "ipv4:..." (whole calls
    spread with round_robin).
    timeout: deadline of each call (gRPC's retries of it included), in seconds.
    retry: retries of UNAVAILABLE and RESOURCE_EXHAUSTED (see retry.py).
    tls: TLSOptions for an encrypted channel; token: sent as `authorization: Bearer <token>`.
    max_in_flight: a fleet's sub-calls at once on one replica.
    """

    def __init__(
        self,
        target: Targets = DEFAULT_TARGET,
        timeout: float = DEFAULT_TIMEOUT_S,
        *,
        retry: RetryPolicy = RetryPolicy(),
        tls: TLSOptions | None = None,
        token: str | None = None,
        max_in_flight: int = MAX_IN_FLIGHT_PER_REPLICA,
    ) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        self.timeout = timeout
        self.retry = retry
        self._metadata = auth_metadata(token)
        self._fleet_options = (tls, retry, self._metadata, timeout, self._next_wait, max_in_flight)
        self._spec = None if is_fleet(target) else channel_spec(target, tls, retry)
        self.target = self._spec.label if self._spec else ""  # a fleet's is set by the subclass

    def replica_load(self) -> dict[str, int]:
        """Items (ScoreGroups: groups) each replica of a fleet answered so far; empty for one server."""
        return dict(self._fleet.load) if self._fleet else {}

    def _next_wait(self, method: str, error: grpc.RpcError, patience: Patience) -> float:
        """How long to wait before calling again; raises RewardServerError to give up."""
        wait = patience.next_wait(error)
        if wait is None:
            raise RewardServerError(
                self.target, method, error.code(), error.details() or "", patience.elapsed()
            ) from error
        log.warning(
            "reward server %s: %s failed with %s (%s) after gRPC's retries; calling again in %.2fs",
            self.target, method, error.code().name, error.details(), wait,
        )
        return wait


class RewardClient(_ClientBase):
    """Blocking client; the options are described on _ClientBase."""

    def __init__(self, target: Targets = DEFAULT_TARGET, timeout: float = DEFAULT_TIMEOUT_S, **options: Any) -> None:
        super().__init__(target, timeout, **options)
        self._fleet = FleetCaller(target, *self._fleet_options) if self._spec is None else None
        if self._fleet:
            self.target = self._fleet.label
            return
        self._channel = open_channel(self._spec)
        self._stub = reward_pb2_grpc.RewardServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def score(
        self, items: Sequence[Any], rubrics: Rubrics = None, mode: ScoringMode = Logprobs(),
        gate: Rubric | None = None, gate_reward: float | None = None, steps: Mapping[str, str] | None = None,
    ) -> list[ItemResult]:
        """items: dicts with prompt, completion and optional reference, id, rubric(s), or
        reward_pb2.Item; rubrics: see requests.Rubrics (None: the server's default);
        mode: Logprobs(), Sampling(n, temperature) or Reasoning(max_tokens, temperature);
        gate: a rule checked first ("math-equal", or a rule dict): an item that fails it gets
        gate_reward (default 0.0) and no rubric reads it (.gated, .gate on its result);
        steps: how process rewards split and reduce ({"delimiter": ..., "reduction": "min"}).
        One result per item, in order; an item that could not be scored has .error set."""
        response = self._call("Score", score_request(items, rubrics, mode, gate, gate_reward, steps))
        return [item_result(result) for result in response.results]

    def score_groups(
        self, groups: Sequence[Mapping[str, Any]], rubrics: Rubrics = None, schedule: str | None = None, **options: Any
    ) -> list[GroupResult]:
        """Judges each group (a dict with prompt, completions and optional reference, id)
        within itself: its completions compared in pairs, both orders read, or listed together,
        once per cyclic shift; one result per group, its completions' rewards in request order.
        schedule: None (all pairs up to 8 completions, neighbours beyond), "all_pairs",
        "neighbours", "anchor" or "listwise"; options: aggregation ("mean_win_probability" or
        "bradley_terry", the latter not with "anchor" or "listwise"), neighbours, anchor, mode
        (Logprobs(), Reasoning(max_tokens): the judge compares in writing first, its texts in
        each rubric's rationales, or Sampling(n)), dry_run (each group's cost, nothing read),
        gate and gate_reward (as in score: a completion that fails the gate is compared with nobody),
        steps (as in score: how a process reward, which scores each completion alone, splits and reduces)."""
        request = group_request(groups, rubrics, schedule, **options)
        return [group_result(r) for r in self._call("ScoreGroups", request).results]

    def info(self) -> reward_pb2.GetInfoResponse:
        return self._call("GetInfo", reward_pb2.GetInfoRequest())

    def prepare_rubrics(self, rubrics: Rubrics) -> list[reward_pb2.RubricInfo]:
        """Rubrics in any form score() takes (G-Eval rubric dicts, templates, rules, served names)
        as the server prepares them (generated steps, a template's verdict, content hash), scoring
        nothing; one RubricInfo per rubric, in order."""
        return list(self._call("PrepareRubrics", prepare_request(rubrics)).rubrics)

    def healthy(self) -> bool:
        """One health check, no retries: False when unreachable or not serving (a fleet: when
        no replica is serving)."""
        if self._fleet:
            return self._fleet.healthy()
        try:
            reply = self._health.Check(
                health_pb2.HealthCheckRequest(), timeout=HEALTH_TIMEOUT_S, metadata=self._metadata
            )
        except grpc.RpcError:
            return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    def _call(self, method: str, request):
        if self._fleet:
            return (self._fleet.call if method in SPLIT_METHODS else self._fleet.call_one)(method, request)
        rpc, patience = getattr(self._stub, method), self.retry.patience()
        while True:
            try:
                return rpc(request, timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError as error:
                time.sleep(self._next_wait(method, error, patience))

    def close(self) -> None:
        (self._fleet or self._channel).close()

    def __enter__(self) -> RewardClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncRewardClient(_ClientBase):
    """As RewardClient, for asyncio; create it inside the event loop that uses it."""

    def __init__(self, target: Targets = DEFAULT_TARGET, timeout: float = DEFAULT_TIMEOUT_S, **options: Any) -> None:
        super().__init__(target, timeout, **options)
        self._fleet = AsyncFleetCaller(target, *self._fleet_options) if self._spec is None else None
        if self._fleet:
            self.target = self._fleet.label
            return
        self._channel = open_aio_channel(self._spec)
        self._stub = reward_pb2_grpc.RewardServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    async def score(
        self, items: Sequence[Any], rubrics: Rubrics = None, mode: ScoringMode = Logprobs(),
        gate: Rubric | None = None, gate_reward: float | None = None, steps: Mapping[str, str] | None = None,
    ) -> list[ItemResult]:
        response = await self._call("Score", score_request(items, rubrics, mode, gate, gate_reward, steps))
        return [item_result(result) for result in response.results]

    async def score_groups(
        self, groups: Sequence[Mapping[str, Any]], rubrics: Rubrics = None, schedule: str | None = None, **options: Any
    ) -> list[GroupResult]:
        request = group_request(groups, rubrics, schedule, **options)
        return [group_result(r) for r in (await self._call("ScoreGroups", request)).results]

    async def info(self) -> reward_pb2.GetInfoResponse:
        return await self._call("GetInfo", reward_pb2.GetInfoRequest())

    async def prepare_rubrics(self, rubrics: Rubrics) -> list[reward_pb2.RubricInfo]:
        return list((await self._call("PrepareRubrics", prepare_request(rubrics))).rubrics)

    async def healthy(self) -> bool:
        if self._fleet:
            return await self._fleet.healthy()
        try:
            reply = await self._health.Check(
                health_pb2.HealthCheckRequest(), timeout=HEALTH_TIMEOUT_S, metadata=self._metadata
            )
        except grpc.RpcError:
            return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    async def _call(self, method: str, request):
        if self._fleet:
            return await (self._fleet.call if method in SPLIT_METHODS else self._fleet.call_one)(method, request)
        rpc, patience = getattr(self._stub, method), self.retry.patience()
        while True:
            try:
                return await rpc(request, timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError as error:
                await asyncio.sleep(self._next_wait(method, error, patience))

    async def close(self) -> None:
        await (self._fleet or self._channel).close()

    async def __aenter__(self) -> AsyncRewardClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
