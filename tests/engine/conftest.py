"""One real server (vLLM engine + embedded judge) per test session: it takes
about a minute to start, so every engine test shares it."""

from __future__ import annotations

import pathlib

import pytest
from geval_server.launcher import start_server, stop_server

TEST_RUBRICS = pathlib.Path(__file__).parents[1] / "rubrics"


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The shared real server, serving the presets and tests/rubrics: (process, address)."""
    log_path = tmp_path_factory.mktemp("server") / "server.log"
    # float32 whatever the processor: these tests check mechanism to 1e-4 and tighter (cache
    # hits read as cold reads, both orders, agreement with transformers), and bfloat16's
    # numbers move about 1e-3 with the shape of the batch a request lands in. The processor's
    # own choice is served and checked in test_vllm_conventions.py.
    process, address = start_server(log_path, "--rubrics", str(TEST_RUBRICS), "--dtype", "float32")
    yield process, address
    stop_server(process)


@pytest.fixture(scope="session")
def server_address(server) -> str:
    return server[1]


@pytest.fixture(scope="session")
def client(server_address):
    from geval_client import RewardClient

    with RewardClient(server_address) as reward_client:
        yield reward_client
