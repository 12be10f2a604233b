"""Replicas as Ray actors on a local CPU Ray: placed, their addresses handed to the client,
a call spread over them, and a replica whose server died restarted by Ray at its address.
The replicas serve the null engine (tests/frameworks/null_replica.py), so the test is light."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import sys
import time

import pytest
from geval_client import RetryPolicy, RewardClient
from geval_client.ray_replicas import RayReplicas

ray = pytest.importorskip("ray")

NULL_REPLICA = [sys.executable, str(pathlib.Path(__file__).with_name("null_replica.py"))]
REPO = pathlib.Path(__file__).resolve().parents[2]
RETRY = RetryPolicy(attempts=2, initial_backoff_s=0.1, max_backoff_s=0.5, wait_for_server_s=120)


def free_base_port(count: int) -> int:
    """A base port with `count` free ports after it, on loopback."""
    for base in range(50400, 50500, count):
        try:
            for port in range(base, base + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no free ports")


@pytest.fixture(scope="module")
def local_ray():
    path = os.pathsep.join([str(REPO / "server"), str(REPO / "client"), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield
    ray.shutdown()


def test_replicas_as_ray_actors_serve_a_fleet_and_come_back_after_a_crash(local_ray):
    replicas = RayReplicas(2, num_cpus=0.5, host="127.0.0.1", base_port=free_base_port(2), command=NULL_REPLICA)
    try:
        addresses = replicas.addresses()
        assert len(set(addresses)) == 2 and all(a.startswith("127.0.0.1:") for a in addresses)
        items = [{"prompt": f"Article {p}.", "completion": f"Summary {c}."} for p in range(8) for c in range(4)]
        with RewardClient(addresses, retry=RETRY) as client:
            assert len(client.score(items)) == 32 and len(client.replica_load()) == 2
            os.kill(replicas.server_pids()[0], signal.SIGKILL)  # the server dies; its actor exits with it
            assert [r.id for r in client.score(items)] == [str(i) for i in range(32)]  # the other takes it all
            deadline = time.monotonic() + 120
            while replicas.addresses() != addresses:  # Ray restarts the actor at the same address
                assert time.monotonic() < deadline
                time.sleep(1)
            time.sleep(6)  # the client set the crashed replica aside for 5 s
            before = client.replica_load()[addresses[0]]
            assert len(client.score(items)) == 32
            assert client.replica_load()[addresses[0]] > before  # back in the fleet
    finally:
        replicas.stop()
