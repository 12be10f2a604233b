"""A prompt's reads on one data-parallel rank: the rank the router keeps for a key (engine/data_parallel.py),
and the key every scorer's reads carry, in every mode, plain and bounded, pointwise and
groupwise. The real engine passing it to vLLM is tested in tests/engine/test_data_parallel_server.py."""

import asyncio
import math
from collections import Counter
from types import SimpleNamespace

import pytest
from geval_client.pb import reward_pb2
from geval_server.api.wire import validate_groups
from geval_server.engine.data_parallel import RankRouter, routed_ranks
from geval_server.engine.null_engine import NullEngine
from geval_server.engine.protocol import Generation
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.base import JudgeInput
from geval_server.scorers.geval.rubrics import load_rubrics, rubric_files
from geval_server.scorers.likelihood.spec import load_specs
from geval_server.scorers.scoring_mode import Logprobs, Reasoning, Sampling

from tests.unit.fakes import SpaceDigitTokenizer, judge_over

RUBRICS = ("summeval-coherence", "summeval-fluency")
LIKELIHOOD = "likelihood-summeval-coherence"
PROMPTS = ("The first article, about rivers.", "The second article, about mountains.", "A third one, on lakes.")
# A GRPO group's completions; numerals, so the bound reads some a second time, masked (`#`).
COMPLETIONS = ("Rivers flow to 3 seas.", "A short summary.", "Two rivers meet in 4 places.")


def test_a_keys_reads_stay_on_the_rank_its_first_read_took():
    router = RankRouter(2)
    first = router.take(PROMPTS[0])
    assert [router.take(PROMPTS[0]) for _ in range(5)] == [first] * 5
    for _ in range(6):
        router.give_back(first)
    assert router.take(PROMPTS[0]) == first  # remembered after its reads ended: the rank's cache holds it


def test_new_keys_go_to_the_rank_with_the_fewest_reads_in_flight():
    router = RankRouter(3)
    busy = router.take(PROMPTS[0])
    router.take(PROMPTS[0])
    second, third = router.take(PROMPTS[1]), router.take(PROMPTS[2])
    assert len({busy, second, third}) == 3
    for _ in range(2):
        router.give_back(busy)
    assert router.take("A fourth prompt.") == busy  # none in flight there now


def test_sequential_calls_still_spread_their_keys():
    """Among ranks with nothing in flight, the one holding the fewest keys: a call of one
    group at a time does not put every group on the first rank."""
    router = RankRouter(2)
    ranks = []
    for prompt in PROMPTS[:2]:
        ranks.append(router.take(prompt))
        router.give_back(ranks[-1])
    assert sorted(ranks) == [0, 1]


def test_a_forgotten_key_is_placed_again():
    router = RankRouter(2, remembered=1)
    router.give_back(router.take(PROMPTS[0]))
    router.give_back(router.take(PROMPTS[1]))  # PROMPTS[0] forgotten
    assert router.take(PROMPTS[0]) is not None and len(router._rank_of) == 1


def test_no_key_or_one_rank_leaves_the_choice_to_vllm():
    assert RankRouter(4).take(None) is None
    assert RankRouter(1).take("A prompt.") is None
    RankRouter(4).give_back(None)


def _parallel(size, local=None, external=False, hybrid=False):
    return SimpleNamespace(data_parallel_size=size, data_parallel_size_local=local or size,
                           data_parallel_external_lb=external, data_parallel_hybrid_lb=hybrid)


@pytest.mark.parametrize(("config", "ranks"), [
    (_parallel(1), 1),
    (_parallel(4), 4),  # one server drives every rank (vLLM's internal balancer)
    (_parallel(4, local=2, hybrid=True), 2),  # this node's ranks; the other node's server keys its own
    (_parallel(4, local=1, external=True), 1),  # a server per rank: vLLM ignores the rank asked for
])
def test_the_ranks_keyed_are_those_the_server_places_requests_on(config, ranks):
    assert routed_ranks(config) == ranks


class KeyedEngine:
    """Records every request with the affinity it carries; answers equal label probabilities,
    log p = -1 per read token, a short rationale and sampled scores."""

    max_model_len = 100_000
    is_running = True
    dtype = "float32"

    def __init__(self, tokenization):
        self._tok = tokenization
        self.requests: list[tuple[str, str, str | None]] = []  # (method, prompt text, affinity)

    def _record(self, method, ids, affinity):
        self.requests.append((method, self._tok.decode(list(ids)), affinity))

    async def token_logprobs(self, prompt_ids, token_ids, *, affinity=None):
        self._record("token_logprobs", prompt_ids, affinity)
        await asyncio.sleep(0)
        return {t: math.log(0.1) for t in token_ids}

    async def prompt_logprobs(self, reads, *, affinity=None):
        for ids, _ in reads:
            self._record("prompt_logprobs", ids, affinity)
        await asyncio.sleep(0)
        return [[-1.0] * tail for _, tail in reads]

    async def generate(self, prompt_ids, max_tokens, stop=(), temperature=0.0, *, affinity=None):
        self._record("generate", prompt_ids, affinity)
        await asyncio.sleep(0)
        return Generation("It reads well.", self._tok.user("It reads well."), False)

    async def sample(self, prompt_ids, n, temperature, max_tokens, seed=None, *, affinity=None):
        self._record("sample", prompt_ids, affinity)
        await asyncio.sleep(0)
        return [" 2"] * n


def _judge():
    tokenization = Tokenization(SpaceDigitTokenizer())
    engine = KeyedEngine(tokenization)
    presets = load_rubrics()
    judge = judge_over(engine, tokenization, [presets[name] for name in RUBRICS],
                       likelihood=[load_specs(rubric_files())[LIKELIHOOD]])
    return judge, engine


def _prompt_read(text):
    """Which of PROMPTS a request's prompt holds."""
    (prompt,) = [prompt for prompt in PROMPTS if prompt in text]
    return prompt


@pytest.mark.parametrize("mode", [Logprobs(), Reasoning(max_tokens=16), Sampling(n=4)],
                         ids=["logprobs", "reasoning", "sampling"])
def test_every_read_of_an_item_carries_its_prompt(mode):
    judge, engine = _judge()
    items = [JudgeInput(prompt, completion) for prompt in PROMPTS for completion in COMPLETIONS]
    names = (*RUBRICS, LIKELIHOOD)
    selection = [(judge.scorers[name], 1.0) for name in names]
    if not isinstance(mode, Logprobs):  # the likelihood read is the same in every mode
        selection = selection[:2]
    outcomes = asyncio.run(judge.score(items, [selection] * len(items), mode))
    assert all(outcome.failure is None for outcome in outcomes)
    assert any("# seas" in text for _, text, _ in engine.requests)  # the bounded reads are among them
    assert all(affinity == _prompt_read(text) for _, text, affinity in engine.requests)
    methods = Counter(method for method, _, _ in engine.requests)
    expected = {Logprobs: {"token_logprobs", "prompt_logprobs"}, Reasoning: {"generate", "token_logprobs"},
                Sampling: {"sample"}}[type(mode)]
    assert set(methods) == expected
    assert {affinity for _, _, affinity in engine.requests} == set(PROMPTS)


def test_every_comparison_of_a_group_carries_its_prompt():
    judge, engine = _judge()
    groups = [reward_pb2.Group(text=prompt, completions=COMPLETIONS) for prompt in PROMPTS]
    request = reward_pb2.ScoreGroupsRequest(groups=groups, rubrics=[reward_pb2.RubricSelection(name=name)
                                                                    for name in RUBRICS])
    valid = validate_groups(request, judge.needs_reference, RUBRICS[0])
    results = asyncio.run(judge.score_groups(valid))
    assert all(result.failure is None for result in results)
    assert any("# seas" in text for _, text, _ in engine.requests)  # the bounded comparisons are among them
    assert all(affinity == _prompt_read(text) for _, text, affinity in engine.requests)
    assert {affinity for _, _, affinity in engine.requests} == set(PROMPTS)


def test_the_null_engine_takes_a_key_and_reads_as_without():
    engine = NullEngine("null", {})
    engine.start()
    keyed = asyncio.run(engine.token_logprobs([1, 2, 3], [4, 5], affinity=PROMPTS[0]))
    assert keyed == asyncio.run(engine.token_logprobs([1, 2, 3], [4, 5]))
    reads = [([1, 2, 3, 4], 2)]
    assert asyncio.run(engine.prompt_logprobs(reads, affinity=PROMPTS[0])) == asyncio.run(engine.prompt_logprobs(reads))
