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
    process, address = start_server(log_path, "--rubrics", str(TEST_RUBRICS))
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
