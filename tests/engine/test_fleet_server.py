"""Two real servers behind one client: the session's shared server and one more like it.
A Score call and a ScoreGroups call put work on both, with the rewards one server gives; a
replica SIGKILLed mid-call loses and doubles nothing. Tests run in file order (the last kills
the extra server)."""

from __future__ import annotations

import collections
import signal
import threading
import time

import pytest
from geval_client import RetryPolicy, RewardClient
from geval_server.launcher import start_server, stop_server

from tests.engine.conftest import TEST_RUBRICS

pytestmark = pytest.mark.engine

TOLERANCE = 1e-3
RETRY = RetryPolicy(attempts=2, initial_backoff_s=0.1, max_backoff_s=0.5, wait_for_server_s=30)
TOPICS = ["the library vote", "a storm at sea", "the football final", "a new vaccine", "rail strikes", "a bakery"]


def article(topic: str) -> str:
    return " ".join([f"This is a news report about {topic}. It gives the facts in plain words."] * 6)


def items(prompts: int, completions: int) -> list[dict]:
    return [{"prompt": article(TOPICS[p % len(TOPICS)]) + f" Part {p}.",
             "completion": f"Summary {c}: a short account of {TOPICS[p % len(TOPICS)]}, version {c}."}
            for p in range(prompts) for c in range(completions)]


@pytest.fixture(scope="module")
def second_server(tmp_path_factory):
    """Another replica, served as the shared one is (float32, the test rubrics), small KV cache."""
    log_path = tmp_path_factory.mktemp("fleet") / "second.log"
    process, address = start_server(log_path, "--rubrics", str(TEST_RUBRICS), "--dtype", "float32",
                                    "--kv-cache-memory-bytes", str(1 << 30))
    yield process, address
    stop_server(process)


@pytest.fixture(scope="module")
def fleet(server_address, second_server):
    with RewardClient([server_address, second_server[1]], retry=RETRY) as client:
        yield client


def test_a_score_call_puts_work_on_both_with_one_servers_rewards(fleet, client):
    batch = items(6, 3)
    spread = fleet.score(batch)
    alone = client.score(batch)
    assert len(fleet.replica_load()) == 2 and sum(fleet.replica_load().values()) == len(batch)
    assert [r.id for r in spread] == [str(i) for i in range(len(batch))]
    assert all(r.ok for r in spread)
    assert max(abs(a.reward - b.reward) for a, b in zip(spread, alone)) <= TOLERANCE


def test_a_score_groups_call_puts_whole_groups_on_both(fleet, client):
    groups = [{"prompt": article(topic), "completions": [f"{topic}: take {c}." for c in range(3)]} for topic in TOPICS]
    before = dict(fleet.replica_load())
    spread = fleet.score_groups(groups)
    alone = client.score_groups(groups)
    added = {replica: count - before.get(replica, 0) for replica, count in fleet.replica_load().items()}
    assert sorted(added.values())[0] > 0 and sum(added.values()) == len(groups)  # groups, whole, on both
    assert [g.id for g in spread] == [str(i) for i in range(len(groups))]
    for a, b in zip(spread, alone):
        assert max(abs(x.reward - y.reward) for x, y in zip(a.completions, b.completions)) <= TOLERANCE


def test_a_replica_killed_mid_call_loses_and_doubles_nothing(fleet, client, second_server):
    batch = items(6, 4)
    outcome: dict = {}
    call = threading.Thread(target=lambda: outcome.update(results=fleet.score(batch)))
    call.start()
    time.sleep(1.0)  # both replicas hold their share
    second_server[0].send_signal(signal.SIGKILL)
    call.join(timeout=600)
    results = outcome["results"]
    assert collections.Counter(r.id for r in results) == collections.Counter(str(i) for i in range(len(batch)))
    assert [r.id for r in results] == [str(i) for i in range(len(batch))]
    alone = client.score(batch)
    assert max(abs(a.reward - b.reward) for a, b in zip(results, alone)) <= TOLERANCE
