"""A prompt's reads on one data-parallel rank: the rank a key names (engine/data_parallel.py),
and the key every scorer's reads carry, in every mode, plain and bounded, pointwise and
groupwise. The real engine passing it to vLLM is tested in tests/engine/test_data_parallel_server.py."""

import asyncio
import math
from collections import Counter
from types import SimpleNamespace

import pytest
from geval_client.pb import reward_pb2
from geval_server.api.wire import validate_groups
from geval_server.defences.chain import DefenceSettings
from geval_server.engine.data_parallel import rank_for, routed_ranks
from geval_server.engine.null_engine import NullEngine
from geval_server.engine.protocol import Generation
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.base import JudgeInput
from geval_server.scorers.geval.rubrics import load_rubrics, rubric_files
from geval_server.scorers.likelihood.spec import load_specs
from geval_server.scorers.scoring_mode import Logprobs, Reasoning, Sampling
from geval_server.server import prepare_judge

from tests.unit.fakes import SpaceDigitTokenizer

RUBRICS = ("summeval-coherence", "summeval-fluency")
LIKELIHOOD = "likelihood-summeval-coherence"
PROMPTS = ("The first article, about rivers.", "The second article, about mountains.", "A third one, on lakes.")
# A GRPO group's completions; numerals, so the bound reads some a second time, masked (`#`).
COMPLETIONS = ("Rivers flow to 3 seas.", "A short summary.", "Two rivers meet in 4 places.")


def test_a_key_names_the_same_rank_in_every_process():
    # Fixed values: Python's hash() of a str changes with each process's salt.
    assert [rank_for(prompt, 8) for prompt in PROMPTS] == [0, 3, 2]
    assert rank_for("", 2) == 0


def test_no_key_or_one_rank_leaves_the_choice_to_vllm():
    assert rank_for(None, 4) is None
    assert rank_for("A prompt.", 1) is None


def test_keys_spread_evenly_over_the_ranks():
    counts = Counter(rank_for(f"prompt {i}", 4) for i in range(4000))
    assert sorted(counts) == [0, 1, 2, 3]
    assert all(900 < count < 1100 for count in counts.values())


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
    judge = asyncio.run(prepare_judge(
        engine, tokenization, judge_model="fake-judge", rubrics=[presets[name] for name in RUBRICS],
        likelihood=[load_specs(rubric_files())[LIKELIHOOD]], defences=DefenceSettings(),
    ))
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
