"""Reward functions for TRL's GRPOTrainer and RLOOTrainer, backed by the server.

    from geval_client import AsyncGEvalReward
    reward = AsyncGEvalReward("judge-host:50051", {"summeval-coherence": 1, "summeval-relevance": 2})
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], ...)

TRL calls `reward(prompts=..., completions=..., completion_ids=..., **columns)`
with every other dataset column as a keyword, plus `log_metric` and `log_extra`,
which this uses for the diagnostics in diagnostics.py (`<name>/<metric>`, and
per-completion columns in TRL's completions table). One call is one Score RPC.

In a TRL trainer use AsyncGEvalReward: TRL runs every sync reward function one
after another and only then starts the async ones, together, so a sync G-Eval
reward holds every async reward back for the length of its RPC.

Both forms pickle and deep-copy (TRL's async rollout worker and Ray ship reward
functions to other processes): a copy connects on its first call. Nothing here
imports trl: the same callables serve any training loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from .client import AsyncRewardClient, RewardClient
from .defaults import DEFAULT_TARGET, DEFAULT_TIMEOUT_S
from .diagnostics import batch_metrics, completion_columns
from .failures import MIN, OnError, grouped_rewards, parse_on_error
from .requests import Rubrics, rubric_selection
from .retry import RetryPolicy
from .reward_batch import RewardBatch, build_batch
from .reward_names import claim_name, reward_name
from .row_rubrics import rubric_error
from .transport import Targets, TLSOptions, channel_spec
from .types import ItemResult, Logprobs, Mode

log = logging.getLogger(__name__)


class _GEvalRewardBase:
    """server: as RewardClient's target (one address, a list, or dns:///name:port).
    rubrics: a name, a list of names, or {name: weight}; the reward is the weighted mean.
    on_error: what a completion gets when the server cannot score it because of the
    completion (empty, too long): "min" (0.0, the default), a float, or "exclude";
    a failure the completion did not cause is always excluded (see failures.py).
    reference_column: dataset column with the human reference, passed to rubrics that
    use one and, with score_references, also scored to measure self-preference.
    source_column: dataset column the judge reads as the input instead of the policy's
    prompt (e.g. the bare article when the prompt wraps it in instructions).
    rubric_column: dataset column with each row's own rubric (a rubric dict or a served
    name; row_rubrics.py), scored instead of `rubrics`, which score rows holding None.
    mode: how G-Eval rubrics read the score slot: Logprobs() (the default), Sampling(n) or
    Reasoning(max_tokens), whose evaluations go to TRL's completions table.
    name: TRL's name for this reward in its logs (`rewards/<name>/mean`); by default
    derived from the rubrics (reward_names.py).
    timeout, retry, tls, token: as RewardClient's.
    """

    def __init__(
        self,
        server: Targets = DEFAULT_TARGET,
        rubrics: Rubrics = None,
        *,
        on_error: OnError = MIN,
        reference_column: str | None = None,
        source_column: str | None = None,
        rubric_column: str | None = None,
        score_references: bool = True,
        mode: Mode = Logprobs(),
        name: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy = RetryPolicy(),
        tls: TLSOptions | None = None,
        token: str | None = None,
    ) -> None:
        self.rubrics = rubrics
        self.on_error = on_error
        self._on_error = parse_on_error(on_error)
        self.reference_column = reference_column
        self.source_column = source_column
        self.rubric_column = rubric_column
        self.score_references = score_references
        self.mode = mode
        self._client_args = dict(target=server, timeout=timeout, retry=retry, tls=tls, token=token)
        self._target = channel_spec(server, tls, retry).label  # a bad address or TLS file fails here
        self.__name__ = name if name is not None else reward_name(rubrics, rubric_column)
        claim_name(self.__name__, self, self._scoring())
        self.last_metrics: dict[str, float] = {}
        self._client = None

    def _scoring(self) -> tuple:
        """Everything that makes two rewards give different values."""
        rubrics = tuple(
            (s.name or s.spec.SerializeToString(deterministic=True), s.weight if s.HasField("weight") else 1.0)
            for s in rubric_selection(self.rubrics)
        )
        return (
            self._target, rubrics, self.rubric_column, self._on_error, self.reference_column, self.source_column,
            self.mode,
        )

    def __getstate__(self) -> dict:
        """A channel cannot be pickled or copied: the copy opens its own on first use."""
        state = dict(self.__dict__)
        state["_client"] = None
        state.pop("_loop", None)
        state.pop("_lock", None)
        return state

    def _batch(self, prompts, completions, completion_ids, columns) -> RewardBatch:
        return build_batch(
            prompts, completions, completion_ids, columns,
            source_column=self.source_column,
            reference_column=self.reference_column,
            score_references=self.score_references,
            rubric_column=self.rubric_column,
        )

    def _finish(
        self, batch: RewardBatch, results: Sequence[ItemResult], latency_s: float, columns: dict
    ) -> list[float | None]:
        rewards = grouped_rewards(results[: batch.completions], batch.groups, self._on_error)
        failed = [i for i, r in enumerate(results[: batch.completions]) if not r.ok]
        if failed:
            first = rubric_error(results[failed[0]].error, batch.rubric_origins[failed[0]])
            log.warning(
                "%s: the server could not score %d of %d completions (on_error=%r for those the completion "
                "caused, the others excluded); first: %s",
                self.__name__, len(failed), batch.completions, self.on_error, first,
            )
        self.last_metrics = batch_metrics(batch, results, latency_s)
        log_metric, log_extra = columns.get("log_metric"), columns.get("log_extra")
        if log_metric is not None:
            for key, value in self.last_metrics.items():
                log_metric(f"{self.__name__}/{key}", value)
        if log_extra is not None:
            for key, values in completion_columns(batch, results).items():
                log_extra(f"{self.__name__}/{key}", values)
        return rewards

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.__name__!r}, server={self._target!r}, rubrics={self.rubrics!r})"


class GEvalReward(_GEvalRewardBase):
    """Blocking reward function (options: see _GEvalRewardBase); safe to call from
    several threads (TRL's async rollout worker runs sync rewards in threads)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __call__(self, prompts, completions, completion_ids=None, **columns) -> list[float | None]:
        batch = self._batch(prompts, completions, completion_ids, columns)
        started = time.perf_counter()
        results = self._connected().score(batch.items, self.rubrics, self.mode)
        return self._finish(batch, results, time.perf_counter() - started, columns)

    def _connected(self) -> RewardClient:
        with self._lock:
            if self._client is None:
                self._client = RewardClient(**self._client_args)
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


class AsyncGEvalReward(_GEvalRewardBase):
    """Coroutine reward function: TRL awaits it on its own event loop, concurrently
    with its other async rewards (options: see _GEvalRewardBase)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loop: asyncio.AbstractEventLoop | None = None

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._loop = None

    async def __call__(self, prompts, completions, completion_ids=None, **columns) -> list[float | None]:
        batch = self._batch(prompts, completions, completion_ids, columns)
        client = self._client_for_running_loop()
        started = time.perf_counter()
        results = await client.score(batch.items, self.rubrics, self.mode)
        return self._finish(batch, results, time.perf_counter() - started, columns)

    def _client_for_running_loop(self) -> AsyncRewardClient:
        """An asyncio channel belongs to the loop it was opened in, so open it there."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = AsyncRewardClient(**self._client_args)
            self._loop = loop
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
