"""vLLM's conventions on a real server: started with a `vllm serve`-style command line
(positional model, vLLM's engine flags in both spellings, VLLM_API_KEY), it runs the
engine with exactly the flags given over our defaults, and serves vLLM's own Prometheus
metrics beside ours."""

from __future__ import annotations

import re
import socket
import threading
import urllib.request

import grpc
import pytest
from geval_client import RewardClient, make_item
from geval_server.engine.defaults import CPU
from geval_server.engine.dtype import cpu_dtype
from geval_server.engine.embedded_model import EMBEDDED_MODEL
from geval_server.engine.vllm_engine import platform
from geval_server.launcher import start_server, stop_server
from grpc_health.v1 import health_pb2, health_pb2_grpc

pytestmark = pytest.mark.engine  # starts a server of its own

KEY = "vllm-key-1c7e"
ARTICLE = " ".join(["The council met on Tuesday and voted to build a library on the depot site."] * 30)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe_until(port: int, stop: threading.Event, seen: list[str]) -> None:
    """What a Kubernetes gRPC probe sees, every 0.2 s: the health status, or the error code."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while not stop.is_set():
            try:
                status = health.Check(health_pb2.HealthCheckRequest(), timeout=1).status
                seen.append(health_pb2.HealthCheckResponse.ServingStatus.Name(status))
            except grpc.RpcError as error:
                seen.append(error.code().name)
            stop.wait(0.2)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port, metrics_port = free_port(), free_port()
    vllm_line = [
        EMBEDDED_MODEL, "--max-model-len", "4096", "--block_size", "64", "--max-num-seqs", "8",
        "--enable-prefix-caching", "--kv-cache-memory-bytes", "1G", "--seed", "0",
    ]
    stop, seen = threading.Event(), []
    prober = threading.Thread(target=probe_until, args=(port, stop, seen))
    prober.start()
    log_path = tmp_path_factory.mktemp("vllm-conventions") / "server.log"
    try:
        process, address = start_server(
            log_path, *vllm_line, "--port", str(port), "--metrics-port", str(metrics_port), "--no-semscore",
            env={"VLLM_API_KEY": KEY},
        )
    finally:
        stop.set()
        prober.join()
    try:
        yield address, metrics_port, seen
    finally:
        stop_server(process)


def test_the_port_opens_only_once_the_engine_serves(server):
    seen = server[2]
    assert seen[0] == "UNAVAILABLE"  # the engine starting: connection refused, as a startup probe sees it
    assert set(seen) <= {"UNAVAILABLE", "SERVING"}  # never open and not serving
    if "SERVING" in seen:
        assert "UNAVAILABLE" not in seen[seen.index("SERVING"):]


def metrics(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def sample(text: str, name: str) -> float:
    """The sum of a metric's samples (over its labels)."""
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE))


def test_the_engine_runs_with_the_flags_given_over_our_defaults(server):
    with RewardClient(server[0], token=KEY) as client:
        settings = dict(client.info().engine_settings)
    assert (settings["max_model_len"], settings["block_size"], settings["max_num_seqs"]) == ("4096", "64", "8")
    assert settings["kv_cache_memory_bytes"] == str(2**30) and settings["enable_prefix_caching"] == "True"
    if platform() == CPU:  # not given: ours, not vLLM's; the number format this processor computes natively
        choice = cpu_dtype()
        assert (settings["dtype"], settings["dtype_reason"]) == (choice.dtype, choice.reason)
        assert "enforce_eager" not in settings  # compiled graphs, vLLM's own default


def test_vllms_metrics_are_on_our_metrics_endpoint(server):
    address, port, _ = server
    with RewardClient(address, token=KEY) as client:
        for _ in range(2):  # the second call hits the first one's cached prefix
            results = client.score([make_item(ARTICLE, "The council chose the depot site for a library.")])
            assert results[0].scores
    text = metrics(port)
    for name in ("vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:num_requests_running"):
        assert re.search(rf"^{re.escape(name)}{{", text, re.MULTILINE), name
    assert sample(text, "vllm:prefix_cache_queries_total") > 0
    assert sample(text, "vllm:prefix_cache_hits_total") > 0
    assert sample(text, "vllm:request_success_total") >= 2
    ours = re.search(r'^geval_calls_total\{code="OK",method="Score"\} (\S+)$', text, re.MULTILINE)
    assert ours and float(ours.group(1)) >= 2
