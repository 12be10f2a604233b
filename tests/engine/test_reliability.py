"""Access control, limits and faults, each with the real engine.

One hardened server (token, TLS, metrics, small limits) serves the access and
limit tests; the engine-death test then kills its engine, a second server takes
its port (a client's retries carry a call across the restart), and the last
test stops that one with SIGTERM while a call is in flight, its own line the log's last.
Tests run in file order.
"""

from __future__ import annotations

import json
import pathlib
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import grpc
import psutil
import pytest
from geval_client import RewardClient, make_item
from geval_client.pb import reward_pb2, reward_pb2_grpc
from geval_client.retry import RetryPolicy
from geval_client.transport import TLSOptions
from geval_server.api.auth import DENIED
from geval_server.launcher import start_server, stop_server
from grpc_health.v1 import health_pb2, health_pb2_grpc

pytestmark = pytest.mark.engine  # starts servers of its own

TOKEN = "test-token-5f1c"
ARTICLE = " ".join(["The council met on Tuesday and voted to build a library on the depot site."] * 40)
LIMITS = [
    "--kv-cache-memory-bytes", "1073741824", "--max-items-per-request", "8", "--max-field-chars", "5000",
    "--max-pending-items", "12", "--max-message-mb", "1",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout_s: float, what: str):
    """Bounded polling for an event (not a speed check): fails after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


class Hardened:
    def __init__(self, tmp: pathlib.Path) -> None:
        self.tmp = tmp
        self.cert, self.key = tmp / "cert.pem", tmp / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", self.key, "-out", self.cert],
            check=True, capture_output=True,
        )
        (tmp / "token").write_text(TOKEN + "\n")
        self.port, self.metrics_port = free_port(), free_port()
        self.process = None

    def start(self, name: str) -> None:
        self.log = self.tmp / f"{name}.log"
        self.process, self.address = start_server(
            self.log, "--port", str(self.port), "--auth-token-file", str(self.tmp / "token"),
            "--tls-cert", str(self.cert), "--tls-key", str(self.key),
            "--metrics-port", str(self.metrics_port), "--shutdown-grace-s", "120", *LIMITS,
        )

    def channel(self) -> grpc.Channel:
        credentials = grpc.ssl_channel_credentials(root_certificates=self.cert.read_bytes())
        return grpc.secure_channel(f"127.0.0.1:{self.port}", credentials)

    def stub(self, channel) -> reward_pb2_grpc.RewardServiceStub:
        return reward_pb2_grpc.RewardServiceStub(channel)

    def metric(self, name: str) -> float:
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
        match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
        return float(match.group(1)) if match else 0.0

    def client(self, **options) -> RewardClient:
        tls = TLSOptions(root_certificates=self.cert)
        return RewardClient(f"127.0.0.1:{self.port}", tls=tls, token=TOKEN, **options)


AUTH = (("authorization", f"Bearer {TOKEN}"),)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    hardened = Hardened(tmp_path_factory.mktemp("hardened"))
    first = None
    try:
        hardened.start("first")
        first = hardened.process
        yield hardened
    finally:
        for process in {first, hardened.process} - {None}:
            stop_server(process)


def long_items(n: int) -> list[reward_pb2.Item]:
    return [make_item(ARTICLE, f"Summary number {i}: the council voted for a library.") for i in range(n)]


def test_calls_need_the_token_but_health_does_not(server):
    with server.channel() as channel:
        stub = server.stub(channel)
        for metadata in [(), (("authorization", "Bearer wrong"),), (("authorization", TOKEN),)]:
            with pytest.raises(grpc.RpcError) as error:
                stub.GetInfo(reward_pb2.GetInfoRequest(), metadata=metadata)
            assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert error.value.details() == DENIED
        with pytest.raises(grpc.RpcError) as error:
            stub.Score(reward_pb2.ScoreRequest(items=long_items(1)))
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert stub.GetInfo(reward_pb2.GetInfoRequest(), metadata=AUTH).judge_model


def test_reflection_needs_the_token_too(server):
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

    with server.channel() as channel:
        with pytest.raises(grpc.RpcError) as error:
            ProtoReflectionDescriptorDatabase(channel).get_services()
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_plaintext_clients_cannot_talk_to_a_tls_server(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        with pytest.raises(grpc.RpcError) as error:
            server.stub(channel).GetInfo(reward_pb2.GetInfoRequest(), metadata=AUTH, timeout=10)
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE


def test_limits_name_the_limit(server):
    with server.channel() as channel:
        stub = server.stub(channel)
        with pytest.raises(grpc.RpcError) as error:
            stub.Score(reward_pb2.ScoreRequest(items=long_items(9)), metadata=AUTH)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "9 items exceed the limit of 8 per request" in error.value.details()

        items = [make_item("Q?", "A" * 5001), make_item("Q?", "A short answer.")]
        results = stub.Score(reward_pb2.ScoreRequest(items=items), metadata=AUTH).results
        assert results[0].error.field == "items[0].completion"
        assert "5001 characters exceed the limit of 5000" in results[0].error.message
        assert not results[1].HasField("error") and results[1].scores

        with pytest.raises(grpc.RpcError) as error:
            stub.Score(reward_pb2.ScoreRequest(items=[make_item("Q?", "x" * 2_000_000)]), metadata=AUTH)
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_full_queue_refuses_new_work_with_a_retry_hint(server):
    with server.channel() as channel:
        stub = server.stub(channel)
        first = stub.Score.future(reward_pb2.ScoreRequest(items=long_items(8)), metadata=AUTH)
        wait_for(lambda: server.metric("geval_pending_items") > 0, 60, "the first call to be pending")
        with pytest.raises(grpc.RpcError) as error:
            stub.Score(reward_pb2.ScoreRequest(items=long_items(8)), metadata=AUTH)
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "queue limit of 12 (--max-pending-items)" in error.value.details()
        assert dict(error.value.trailing_metadata())["grpc-retry-pushback-ms"] == "1000"
        assert len(first.result().results) == 8  # the accepted call is still served in full


def test_a_deadline_aborts_the_engine_work(server):
    cancelled_before = server.metric("geval_engine_requests_cancelled_total")
    names = ("summeval-coherence", "summeval-relevance", "summeval-consistency")
    rubrics = [reward_pb2.RubricSelection(name=n) for n in names]
    with server.channel() as channel:
        with pytest.raises(grpc.RpcError) as error:
            server.stub(channel).Score(
                reward_pb2.ScoreRequest(items=long_items(8), rubrics=rubrics), metadata=AUTH, timeout=0.5
            )
    assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    wait_for(lambda: server.metric("geval_engine_requests_cancelled_total") > cancelled_before, 60, "cancellation")
    wait_for(lambda: server.metric("geval_engine_requests_in_flight") == 0, 60, "vLLM to drop the requests")
    assert server.metric("geval_pending_items") == 0


def test_engine_death_exits_non_zero_and_retries_carry_over_a_restart(server):
    engine_cores = [p for p in psutil.Process(server.process.pid).children(recursive=True)
                    if "EngineCore" in " ".join(p.cmdline()) or "EngineCore" in p.name()]
    assert engine_cores, "no vLLM engine process found"
    for core in engine_cores:
        core.kill()
    assert server.process.wait(timeout=120) == 3
    log = server.log.read_text()
    assert "the judge engine died" in log

    outcome = {}
    retrying = server.client(timeout=60, retry=RetryPolicy(max_backoff_s=4.0, wait_for_server_s=280))

    def call():
        outcome["results"] = retrying.score([make_item("Q?", "An answer.")])

    caller = threading.Thread(target=call)
    caller.start()  # the server is down: the call retries on UNAVAILABLE
    server.start("second")  # a supervisor's restart, on the same port
    caller.join(timeout=300)
    retrying.close()
    assert not caller.is_alive()
    assert outcome["results"][0].scores and outcome["results"][0].ok


def test_sigterm_finishes_in_flight_work_then_exits_zero_and_stopped_is_the_last_line(server):
    # vLLM's engine processes and the resource tracker write to the server's log too, some after it exits
    others = psutil.Process(server.process.pid).children(recursive=True)
    with server.channel() as channel:
        stub = server.stub(channel)
        in_flight = stub.Score.future(reward_pb2.ScoreRequest(items=long_items(8)), metadata=AUTH)
        wait_for(lambda: server.metric("geval_pending_items") > 0, 60, "the call to be pending")
        server.process.send_signal(signal.SIGTERM)
        results = in_flight.result(timeout=300).results
        assert len(results) == 8 and all(r.scores for r in results)
    assert server.process.wait(timeout=120) == 0
    assert not psutil.wait_procs(others, timeout=60)[1], "processes of the server outlived it"
    # Nothing after the server's own last line: no extension reporting leaks at exit, no leaked shared memory.
    log = server.log.read_text()
    assert log.rstrip().endswith("INFO geval_server.server: stopped"), log[log.rfind("shutting down"):]
    # one log line per call, the interceptor's, with the servicer's fields merged in
    lines = [json.loads(line.split(": ", 1)[1]) for line in server.log.read_text().splitlines()
             if "geval_server.api.calls: {" in line]
    assert any(line["method"].endswith("/Score") and line["items"] == 8 and line["code"] == "OK" for line in lines)
