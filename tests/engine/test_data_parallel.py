"""vLLM's data parallel inside one server: the engine asks vLLM for the rank a read's key
names, through the installed AsyncLLM.generate's own signature; a real server with
`--data-parallel-size 2` reads each prompt on that rank alone (vLLM's per-rank prefix-cache
counters) and gives the single-rank server's rewards."""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import time
import urllib.request
from types import SimpleNamespace

import pytest
from geval_client import RewardClient
from geval_server.engine.data_parallel import RankRouter, routed_ranks
from geval_server.engine.vllm_engine import VllmEngine
from geval_server.launcher import start_server, stop_server

from tests.engine.conftest import TEST_RUBRICS
from tests.engine.test_vllm_conventions import free_port

pytestmark = pytest.mark.engine

TOLERANCE = 1e-3  # float32 on both servers; a request's numbers move with the batch it lands in
RUBRICS = ["summeval-coherence", "summeval-fluency"]
TOPICS = ["the library vote", "a storm at sea", "the football final", "a new vaccine", "rail strikes", "a bakery",
          "the city budget", "a river flood"]


def article(topic: str) -> str:
    return " ".join([f"This is a news report about {topic}. It gives the facts in plain words."] * 6)


def completions(topic: str, count: int = 4) -> list[str]:
    return [f"Summary {c}: a short account of {topic}, with {c + 2} facts." for c in range(count)]


def group(topic: str, count: int = 4) -> list[dict]:
    """A GRPO group as Score items: one prompt, its completions."""
    return [{"prompt": article(topic), "completion": text} for text in completions(topic, count)]


class RecordingAsyncLLM:
    """Stands in for vLLM's AsyncLLM: binds every generate call to the installed
    AsyncLLM.generate's signature (a renamed or removed parameter raises TypeError) and
    records the rank asked for."""

    def __init__(self) -> None:
        from vllm.v1.engine.async_llm import AsyncLLM

        self._signature = inspect.signature(AsyncLLM.generate)
        self.ranks: list[int | None] = []

    async def generate(self, *args, **kwargs):
        arguments = self._signature.bind(self, *args, **kwargs).arguments
        self.ranks.append(arguments.get("data_parallel_rank"))
        params = arguments["sampling_params"]
        slot = {token: SimpleNamespace(logprob=-1.0) for token in params.logprob_token_ids}
        yield SimpleNamespace(outputs=[SimpleNamespace(logprobs=[slot])])


@pytest.mark.parametrize("size", [1, 2, 3])
def test_a_read_asks_vllm_for_the_rank_its_key_was_given(size):
    from vllm.config import ParallelConfig

    engine = VllmEngine("unused", {}, read_memo_size=0)
    engine._engine = RecordingAsyncLLM()
    engine._router = RankRouter(routed_ranks(ParallelConfig(data_parallel_size=size)))  # as start() sets it
    keys = [article(topic) for topic in TOPICS]

    async def reads():
        for key in keys + keys:
            assert await engine.token_logprobs([1, 2, 3], [4, 5], affinity=key) == {4: -1.0, 5: -1.0}
        await engine.token_logprobs([1, 2, 3], [4])  # no key: vLLM's own choice

    asyncio.run(reads())
    ranks = engine._engine.ranks
    assert ranks[len(keys):-1] == ranks[:len(keys)] and ranks[-1] is None  # a key's reads on one rank
    assert set(ranks[:-1]) == ({None} if size == 1 else set(range(size)))


def metrics(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def queries_per_rank(port: int) -> dict[str, float]:
    """vLLM's prefix-cache queries (prompt tokens looked up) per data-parallel rank."""
    found = re.findall(r'^vllm:prefix_cache_queries_total\{[^}]*engine="(\d+)"[^}]*\} (\S+)$', metrics(port),
                       re.MULTILINE)
    return {rank: float(value) for rank, value in found}


@pytest.fixture(scope="module")
def parallel_server(tmp_path_factory):
    """A server with two data-parallel ranks, served as the shared one is (float32, the test
    rubrics): (address, metrics port)."""
    metrics_port = free_port()
    log_path = tmp_path_factory.mktemp("data-parallel") / "server.log"
    process, address = start_server(
        log_path, "--rubrics", str(TEST_RUBRICS), "--dtype", "float32", "--data-parallel-size", "2",
        "--kv-cache-memory-bytes", str(1 << 30), "--metrics-port", str(metrics_port), "--no-semscore")
    yield address, metrics_port
    stop_server(process)


def read_on(port: int, call) -> dict[str, float]:
    """The prefix-cache queries each rank took during `call` (vLLM records a step's counters
    just after its outputs, so they are read until they settle)."""
    before = queries_per_rank(port)
    call()
    after, settled = queries_per_rank(port), None
    while after != settled:
        time.sleep(0.5)
        settled, after = after, queries_per_rank(port)
    return {rank: after[rank] - before.get(rank, 0.0) for rank in after}


def test_a_call_spreads_its_groups_and_every_read_of_a_prompt_stays_on_its_rank(parallel_server):
    address, port = parallel_server
    topics = TOPICS[:2]
    with RewardClient(address) as client:
        taken = read_on(port, functools.partial(client.score, group(topics[0]) + group(topics[1]), rubrics=RUBRICS))
        assert taken["0"] > 0 and taken["1"] > 0, taken  # a group on each rank
        ranks = []
        for topic in topics:  # the comparisons of each group: the rank its Score reads took
            compared = [{"prompt": article(topic), "completions": completions(topic)}]
            taken = read_on(port, functools.partial(client.score_groups, compared, rubrics=RUBRICS))
            [rank] = [rank for rank, queries in taken.items() if queries > 0]
            ranks.append(rank)
        assert sorted(ranks) == ["0", "1"], ranks


def test_rewards_are_the_single_rank_servers(parallel_server, client):
    items = [item for topic in TOPICS[:4] for item in group(topic, 3)]
    with RewardClient(parallel_server[0]) as parallel:
        spread = parallel.score(items, rubrics=RUBRICS)
        groups = [{"prompt": article(topic), "completions": completions(topic, 3)} for topic in TOPICS[:4]]
        compared = parallel.score_groups(groups, rubrics=RUBRICS)
    alone = client.score(items, rubrics=RUBRICS)
    assert all(r.ok for r in spread)
    assert max(abs(a.reward - b.reward) for a, b in zip(spread, alone)) <= TOLERANCE
    for a, b in zip(compared, client.score_groups(groups, rubrics=RUBRICS)):
        assert max(abs(x.reward - y.reward) for x, y in zip(a.completions, b.completions)) <= TOLERANCE
