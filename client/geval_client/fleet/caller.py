"""How RewardClient and AsyncRewardClient call a fleet: one channel per replica, each
Score and ScoreGroups call cut prompt by prompt over the replicas up (calls.py), at most
`max_in_flight` sub-calls on a replica at once.

A sub-call whose replica went away (UNAVAILABLE: refused, reset, restarting) or sheds load
is sent again, at once, to the replicas still up; the replica is set aside a few seconds
(replicas.py). Only when none is up does the call wait, as a one-server call does, for up to
RetryPolicy.wait_for_server_s. Any other failure fails the whole call, naming the replica.
GetInfo and PrepareRubrics go to one replica up (the fleet's replicas serve the same rubrics).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ..errors import RewardServerError
from ..pb import reward_pb2, reward_pb2_grpc
from ..retry import Patience, RetryPolicy, try_elsewhere
from ..transport import Targets, TLSOptions, fleet_entries, open_aio_channel, open_channel, replica_spec, resolve
from .calls import Call
from .replicas import Replicas, served_rubrics

log = logging.getLogger(__name__)

MAX_IN_FLIGHT_PER_REPLICA = 4
INFO_TIMEOUT_S = 10.0
HEALTH_TIMEOUT_S = 5.0
NextWait = Callable[[str, grpc.RpcError, Patience], float]  # the client's: how long to wait, or raise


@dataclass
class _Replica:
    channel: Any
    stub: reward_pb2_grpc.RewardServiceStub
    health: health_pb2_grpc.HealthStub
    slots: Any  # a semaphore of max_in_flight


class _FleetBase:
    def __init__(
        self, targets: Targets, tls: TLSOptions | None, retry: RetryPolicy, metadata: tuple, timeout: float,
        next_wait: NextWait, max_in_flight: int,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self._replicas = Replicas(fleet_entries(targets), resolve)
        self.label = ",".join(self._replicas.entries)
        self._tls, self._retry, self._metadata, self._timeout = tls, retry, metadata, timeout
        self._next_wait, self._max_in_flight = next_wait, max_in_flight
        self._open: dict[str, _Replica] = {}
        self.load: collections.Counter[str] = collections.Counter()  # entries each replica answered

    def _reopen(self, open_channel_for: Callable, semaphore: Callable) -> None:
        """Channels for replicas resolved anew. A gone replica's channel is dropped, not closed:
        a call still on it ends as it would (or fails over), and the channel closes when freed."""
        current = self._replicas.current()
        for address, host in current.items():
            if address not in self._open:
                channel = open_channel_for(replica_spec(address, host, self._tls, self._retry))
                self._open[address] = _Replica(
                    channel, reward_pb2_grpc.RewardServiceStub(channel), health_pb2_grpc.HealthStub(channel),
                    semaphore(self._max_in_flight),
                )
        for address in [address for address in self._open if address not in current]:
            del self._open[address]

    def _compared(self, outcomes: dict[str, Any]) -> grpc.RpcError | None:
        """GetInfo replies of unchecked replicas: compared (MixedFleet if they differ); a replica
        that could not answer now is set aside, one that refused (a bad token) fails the call.
        Returns the last error, if any."""
        error = None
        served = {}
        for address, outcome in outcomes.items():
            if isinstance(outcome, grpc.RpcError):
                error = self._failed("GetInfo", address, outcome)
            else:
                served[address] = served_rubrics(outcome)
        self._replicas.add_compared(served)
        return error

    def _failed(self, method: str, address: str, error: grpc.RpcError) -> grpc.RpcError:
        """A sub-call's failure: its replica set aside if another may take the work, else raised."""
        if not try_elsewhere(error):
            raise RewardServerError(address, method, error.code(), error.details() or "") from error
        log.warning("replica %s: %s failed with %s (%s); sending its work to the others",
                    address, method, error.code().name, error.details())
        self._replicas.set_aside(address)
        return error

    def _settle(self, call, method: str, address: str, indexes, outcome) -> grpc.RpcError | None:
        """A sub-call's outcome taken in: its items answered, or the error that sends them to
        another replica (returned)."""
        if isinstance(outcome, grpc.RpcError):
            return self._failed(method, address, outcome)
        self._replicas.answered(address)
        self.load[address] += len(indexes)
        call.answered(address, indexes, outcome)
        return None

    def _none_up(self, method: str) -> RewardServerError:
        return RewardServerError(self.label, method, grpc.StatusCode.UNAVAILABLE, "no replica of the fleet is up")

    def _remaining(self, deadline: float) -> float:
        return max(deadline - time.monotonic(), 0.001)


class FleetCaller(_FleetBase):
    """The blocking client's fleet; safe to call from several threads."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="geval-fleet")

    def call(self, method: str, request):
        """Score or ScoreGroups, cut over the fleet; a failed share is placed again as soon as it fails."""
        call, patience = Call(method, request), self._retry.patience()
        deadline = time.monotonic() + self._timeout
        waiting, running, error = list(call.pending), {}, None
        while waiting or running:
            if waiting:
                error = self._refresh() or error
                with self._lock:
                    up = self._replicas.up()
                if not up and not running:
                    time.sleep(self._next_wait(method, error or self._none_up(method), patience))
                    with self._lock:
                        up = self._replicas.ready()
                if up:
                    with self._lock:
                        for address, indexes, sub in call.parts(up, waiting):
                            future = self._pool.submit(self._send, method, sub, self._open[address], deadline)
                            running[future] = (address, indexes)
                    waiting = []
            if running:
                done, _ = futures.wait(running, return_when=futures.FIRST_COMPLETED)
                for future in done:
                    address, indexes = running.pop(future)
                    with self._lock:
                        failure = self._settle(call, method, address, indexes, future.result())
                    if failure is not None:
                        error = failure
                        waiting += indexes
        return call.response()

    def call_one(self, method: str, request):
        """A call any one replica answers (GetInfo, PrepareRubrics)."""
        patience = self._retry.patience()
        deadline = time.monotonic() + self._timeout
        while True:
            error = self._refresh()
            with self._lock:
                ready = [(address, self._open[address]) for address in self._replicas.ready()]
            for address, replica in ready:
                outcome = self._send(method, request, replica, deadline)
                if not isinstance(outcome, grpc.RpcError):
                    return outcome
                with self._lock:
                    error = self._failed(method, address, outcome)
            time.sleep(self._next_wait(method, error or self._none_up(method), patience))

    def healthy(self) -> bool:
        """At least one replica is up and serving."""
        self._refresh()
        with self._lock:
            replicas = [self._open[address] for address in self._replicas.up()]
        for replica in replicas:
            try:
                reply = replica.health.Check(health_pb2.HealthCheckRequest(), timeout=HEALTH_TIMEOUT_S,
                                             metadata=self._metadata)
            except grpc.RpcError:
                continue
            if reply.status == health_pb2.HealthCheckResponse.SERVING:
                return True
        return False

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        with self._lock:
            for replica in self._open.values():
                replica.channel.close()
            self._open.clear()

    def _refresh(self) -> grpc.RpcError | None:
        with self._lock:
            self._reopen(open_channel, threading.BoundedSemaphore)
            unchecked = [(address, self._open[address]) for address in self._replicas.unchecked()]
        replies = list(self._pool.map(self._info, (replica for _, replica in unchecked)))
        with self._lock:
            return self._compared({address: reply for (address, _), reply in zip(unchecked, replies)})

    def _info(self, replica: _Replica):
        try:
            return replica.stub.GetInfo(reward_pb2.GetInfoRequest(), timeout=INFO_TIMEOUT_S, metadata=self._metadata)
        except grpc.RpcError as error:
            return error

    def _send(self, method: str, request, replica: _Replica, deadline: float):
        with replica.slots:
            try:
                return getattr(replica.stub, method)(
                    request, timeout=self._remaining(deadline), metadata=self._metadata
                )
            except grpc.RpcError as error:
                return error


class AsyncFleetCaller(_FleetBase):
    """The asyncio client's fleet; create it inside the event loop that uses it."""

    async def call(self, method: str, request):
        call, patience = Call(method, request), self._retry.patience()
        deadline = time.monotonic() + self._timeout
        waiting, running, error = list(call.pending), {}, None
        try:
            while waiting or running:
                if waiting:
                    error = await self._refresh() or error
                    up = self._replicas.up()
                    if not up and not running:
                        await asyncio.sleep(self._next_wait(method, error or self._none_up(method), patience))
                        up = self._replicas.ready()
                    for address, indexes, sub in call.parts(up, waiting) if up else ():
                        task = asyncio.ensure_future(self._send(method, sub, self._open[address], deadline))
                        running[task] = (address, indexes)
                    waiting = waiting if not up else []
                if running:
                    done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        address, indexes = running.pop(task)
                        failure = self._settle(call, method, address, indexes, task.result())
                        if failure is not None:
                            error = failure
                            waiting += indexes
        finally:
            for task in running:
                task.cancel()
        return call.response()

    async def call_one(self, method: str, request):
        patience = self._retry.patience()
        deadline = time.monotonic() + self._timeout
        while True:
            error = await self._refresh()
            for address in self._replicas.ready():
                outcome = await self._send(method, request, self._open[address], deadline)
                if not isinstance(outcome, grpc.RpcError):
                    return outcome
                error = self._failed(method, address, outcome)
            await asyncio.sleep(self._next_wait(method, error or self._none_up(method), patience))

    async def healthy(self) -> bool:
        await self._refresh()
        for address in self._replicas.up():
            try:
                reply = await self._open[address].health.Check(
                    health_pb2.HealthCheckRequest(), timeout=HEALTH_TIMEOUT_S, metadata=self._metadata
                )
            except grpc.RpcError:
                continue
            if reply.status == health_pb2.HealthCheckResponse.SERVING:
                return True
        return False

    async def close(self) -> None:
        for replica in self._open.values():
            await replica.channel.close()
        self._open.clear()

    async def _refresh(self) -> grpc.RpcError | None:
        await asyncio.to_thread(self._replicas.current)  # a DNS look-up, when due, off the event loop
        self._reopen(open_aio_channel, asyncio.Semaphore)
        unchecked = self._replicas.unchecked()
        replies = await asyncio.gather(*(self._info(self._open[address]) for address in unchecked))
        return self._compared(dict(zip(unchecked, replies)))

    async def _info(self, replica: _Replica):
        try:
            return await replica.stub.GetInfo(
                reward_pb2.GetInfoRequest(), timeout=INFO_TIMEOUT_S, metadata=self._metadata
            )
        except grpc.RpcError as error:
            return error

    async def _send(self, method: str, request, replica: _Replica, deadline: float):
        async with replica.slots:
            try:
                return await getattr(replica.stub, method)(
                    request, timeout=self._remaining(deadline), metadata=self._metadata
                )
            except grpc.RpcError as error:
                return error
