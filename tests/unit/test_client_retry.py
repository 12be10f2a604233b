"""Retries against scripted gRPC servers on loopback (no engine): gRPC's own retry
policy honours the server's `grpc-retry-pushback-ms` (wait that long; a negative
value means do not retry), and the client keeps calling a server that stays
unavailable for longer than gRPC's five attempts cover (a restart), within
RetryPolicy.wait_for_server_s."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent import futures

import grpc
import pytest
from geval_client import AsyncRewardClient, RetryPolicy, RewardClient, RewardServerError
from geval_client.pb import reward_pb2, reward_pb2_grpc

ITEM = {"prompt": "Question?", "completion": "Answer."}
FAST = dict(initial_backoff_s=0.01, max_backoff_s=0.02)


class Shedding(reward_pb2_grpc.RewardServiceServicer):
    """Refuses the first calls with the scripted (status, pushback ms) pairs, then answers;
    records when each attempt arrived."""

    def __init__(self, script) -> None:
        self.script = list(script)
        self.arrivals: list[float] = []

    def Score(self, request, context):
        self.arrivals.append(time.monotonic())
        if self.script:
            code, pushback_ms = self.script.pop(0)
            if pushback_ms is not None:
                context.set_trailing_metadata((("grpc-retry-pushback-ms", str(pushback_ms)),))
            context.abort(code, f"scripted {code.name}")
        return reward_pb2.ScoreResponse(results=[reward_pb2.ItemResult(id=i.id, reward=0.5) for i in request.items])


def start(service, port: int = 0) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    reward_pb2_grpc.add_RewardServiceServicer_to_server(service, server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, bound


@pytest.fixture
def serving():
    started: list[grpc.Server] = []

    def run(service, port: int = 0) -> str:
        server, bound = start(service, port)
        started.append(server)
        return f"127.0.0.1:{bound}"

    yield run
    for server in started:
        server.stop(grace=None)


BUSY = grpc.StatusCode.RESOURCE_EXHAUSTED


def test_the_server_pushback_sets_the_wait_before_the_next_attempt(serving):
    service = Shedding([(BUSY, 300), (BUSY, 300)])
    with RewardClient(serving(service), retry=RetryPolicy(attempts=5, **FAST)) as client:
        assert [r.reward for r in client.score([ITEM])] == [0.5]
    gaps = [b - a for a, b in zip(service.arrivals, service.arrivals[1:])]
    assert len(gaps) == 2 and min(gaps) >= 0.29  # the pushback, not the 10-20 ms backoff


def test_a_negative_pushback_stops_the_retries(serving):
    service = Shedding([(BUSY, -1)] * 5)
    with RewardClient(serving(service), retry=RetryPolicy(attempts=5, **FAST)) as client:
        with pytest.raises(RewardServerError) as error:
            client.score([ITEM])
    assert error.value.code() == BUSY
    assert len(service.arrivals) == 1


def test_resource_exhausted_without_pushback_is_not_load_shedding_and_is_not_retried_again(serving):
    # A message over the size limit also reads RESOURCE_EXHAUSTED; only the server's
    # load shedding carries a pushback, so only that is worth calling again.
    service = Shedding([(BUSY, None)] * 20)
    with RewardClient(serving(service), retry=RetryPolicy(attempts=3, wait_for_server_s=60, **FAST)) as client:
        with pytest.raises(RewardServerError):
            client.score([ITEM])
    assert len(service.arrivals) == 3  # gRPC's attempts of one call, no further calls


def test_a_server_busy_for_longer_than_grpc_attempts_cover_is_called_again(serving):
    service = Shedding([(BUSY, 20)] * 8)
    with RewardClient(serving(service), retry=RetryPolicy(attempts=3, wait_for_server_s=60, **FAST)) as client:
        assert [r.reward for r in client.score([ITEM])] == [0.5]
    assert len(service.arrivals) == 9


def test_a_restart_longer_than_grpc_attempts_cover_is_waited_out(serving):
    server, port = start(Shedding([]))
    server.stop(grace=None).wait()  # the server is down: connections are refused
    restarted = Shedding([(grpc.StatusCode.UNAVAILABLE, None)] * 7)  # then it is back, still warming up
    outcome = {}
    policy = RetryPolicy(attempts=3, initial_backoff_s=0.05, max_backoff_s=0.2, wait_for_server_s=120)
    with RewardClient(f"127.0.0.1:{port}", retry=policy) as client:
        caller = threading.Thread(target=lambda: outcome.setdefault("results", client.score([ITEM])))
        caller.start()
        time.sleep(1.0)  # several of gRPC's attempt rounds fail while nothing listens
        serving(restarted, port)
        caller.join(timeout=60)
    assert [r.reward for r in outcome["results"]] == [0.5]
    assert len(restarted.arrivals) == 8


def test_without_patience_a_down_server_fails_after_grpc_attempts_naming_it(serving):
    server, port = start(Shedding([]))
    server.stop(grace=None).wait()
    address = f"127.0.0.1:{port}"
    with RewardClient(address, retry=RetryPolicy(attempts=2, wait_for_server_s=0, **FAST)) as client:
        with pytest.raises(RewardServerError) as error:
            client.score([ITEM])
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE
    assert str(error.value).startswith(f"reward server {address}: Score failed: UNAVAILABLE")


def test_the_async_client_honours_pushback_too(serving):
    service = Shedding([(BUSY, 300)])
    address = serving(service)

    async def score():
        async with AsyncRewardClient(address, retry=RetryPolicy(attempts=5, **FAST)) as client:
            return await client.score([ITEM])

    assert [r.reward for r in asyncio.run(score())] == [0.5]
    assert service.arrivals[1] - service.arrivals[0] >= 0.29


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(attempts=6), "attempts must be 1-5"),
        (dict(attempts=0), "attempts must be 1-5"),
        (dict(wait_for_server_s=-1), "wait_for_server_s"),
        (dict(multiplier=0.5), "multiplier"),
    ],
)
def test_bad_policies_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**options)
