"""Comparisons read in reasoning and sampling mode, through GroupJudge with the fake
byte-level tokenizer and a fake engine that writes a comparison naming the listed
responses and samples seeded letters: the request's order moves no reward, copies get
equal rewards, the rationales come back per read and order, the generated tokens are
counted, and a dry run counts the reads without making one."""

import asyncio
import math
import random

import pytest
from geval_client.pb import reward_pb2
from geval_client.types import group_result as client_group_result
from geval_server.api.wire import RequestError, group_result, validate_groups
from geval_server.defences.chain import DefenceSettings, defences_for
from geval_server.engine.protocol import Generation
from geval_server.engine.tokenization import Tokenization
from geval_server.groupwise.plan import Group, Schedule, cost
from geval_server.groupwise.results import ANCHOR
from geval_server.groupwise.win_matrix import Aggregation
from geval_server.scorers.geval.groups.judge import GroupJudge, GroupRequest
from geval_server.scorers.geval.groups.prompt import PAIR
from geval_server.scorers.scoring_mode import Logprobs, Reasoning, Sampling

from tests.unit.test_groupwise_copies import COPIES, GROUP, RESPONSE, RUBRIC, STRENGTH, StrengthEngine

ORDER = [4, 8, 0, 6, 2, 5, 1, 7, 3]
SCHEDULES = [(Schedule.ALL_PAIRS, 4), (Schedule.NEIGHBOURS, 1), (Schedule.ANCHOR, 4), (Schedule.LISTWISE, 4)]


class WritingEngine(StrengthEngine):
    """Writes a comparison that names the listed responses in order and runs on into a
    verdict (which the stop strings cut); samples letters by strength, seeded, with some
    answers that are no letter."""

    def __init__(self, tokenization: Tokenization, max_model_len: int = 100_000) -> None:
        super().__init__(tokenization)
        self.max_model_len = max_model_len
        self.written: list[list[int]] = []  # the prompts the judge wrote after
        self.sampled: list[tuple[list[int], int]] = []  # the prompts sampled at, and the seed
        self.generated = 0  # tokens written, a verdict's cut by the stop strings included

    async def generate(self, prompt_ids, max_tokens, stop=(), temperature=0.0, *, affinity=None):
        self.written.append(list(prompt_ids))
        await asyncio.sleep(0)
        listed = RESPONSE.findall(self._tok.decode(list(prompt_ids)))
        text = " ".join(f"Response {letter} reads {body!r}." for letter, body in listed)
        verdict = "The response better on" if len(listed) == PAIR else "The best response on"
        ids = self._tok.template(f"{text}\n{verdict} Coherence is Response A")[:max_tokens]
        self.generated += len(ids)
        written = self._tok.decode(ids)
        cut = min([written.find(s) for s in stop if s in written], default=len(written))
        return Generation(written[:cut], ids, len(ids) == max_tokens)

    async def sample(self, prompt_ids, n, temperature, max_tokens, seed=None, *, affinity=None):
        self.sampled.append((list(prompt_ids), seed))
        await asyncio.sleep(0)
        listed = RESPONSE.findall(self._tok.decode(list(prompt_ids)))
        answers = [f" {letter}" for letter, _ in listed] + [" The"]
        weights = [STRENGTH.get(body, 1.0) * (2.0 if letter == "A" else 1.0) for letter, body in listed] + [0.3]
        return random.Random(seed).choices(answers, weights, k=n)


def _judge(engine, tokenization, vocabulary, group, schedule, k, mode, dry_run=False):
    judge = GroupJudge(engine, tokenization, vocabulary)
    request = GroupRequest([group], [(RUBRIC, 1.0)], schedule, k, Aggregation.MEAN_WIN_PROBABILITY, mode, dry_run)
    (result,) = asyncio.run(judge.judge(request, defences_for(frozenset(), DefenceSettings()), "fake-judge"))
    return result, judge


def _group(texts, schedule):
    return Group("An article.", texts, anchor="An anchor text." if schedule is Schedule.ANCHOR else None)


def _invariant(result, moved):
    """Copies equal, distinct texts apart, and the moved group's rewards the same, bit for bit."""
    assert result.failure is None and all(failure is None for failure in result.member_failures)
    for same in COPIES:
        assert len({result.rewards[i] for i in same}) == 1
    assert len(set(result.rewards)) == 6
    assert [moved.rewards[ORDER.index(i)] for i in range(len(GROUP))] == result.rewards


@pytest.mark.parametrize(("schedule", "k"), SCHEDULES)
def test_reasoning_rewards_ignore_the_groups_order_and_carry_the_rationales(tokenization, vocabulary, schedule, k):
    mode = Reasoning(max_tokens=400)
    engine = WritingEngine(tokenization)
    result, judge = _judge(engine, tokenization, vocabulary, _group(GROUP, schedule), schedule, k, mode)
    moved, _ = _judge(WritingEngine(tokenization), tokenization, vocabulary,
                      _group([GROUP[i] for i in ORDER], schedule), schedule, k, mode)
    _invariant(result, moved)
    assert result.mode == mode and result.engine_reads == len(engine.written) == len(set(map(tuple, engine.written)))
    assert result.prompt_tokens == sum(map(len, engine.written))
    assert result.generated_tokens == engine.generated
    (per_rubric,) = result.per_rubric
    assert len(per_rubric.rationales) == result.engine_reads == len(moved.per_rubric[0].rationales)
    for rationale in per_rubric.rationales:  # each text names the responses as that prompt listed them
        texts = ["An anchor text." if i == ANCHOR else GROUP[i] for i in rationale.listed]
        assert rationale.text == " ".join(f"Response {'ABCDEFGH'[p]} reads {t!r}." for p, t in enumerate(texts))
    if schedule is not Schedule.LISTWISE:  # both orders of each pair
        assert {r.listed for r in per_rubric.rationales} == {r.listed[::-1] for r in per_rubric.rationales}
    # the judge writes after the plain prompt's text up to the last response, then is asked to compare first
    prompt = judge.prompt_for(RUBRIC)
    size = len(RESPONSE.findall(tokenization.decode(engine.written[0])))
    ask, slot = prompt.reasoning(size).ask_ids, prompt.layout(size).slot.ids
    for ids in engine.written:
        assert ids[-len(ask):] == ask
    assert judge.content_hash(RUBRIC, "fake-judge", size, reasoning=True) == per_rubric.content_hash
    assert per_rubric.content_hash != judge.content_hash(RUBRIC, "fake-judge", size)
    # the verdict is read after the judge's text, cut before it wrote a verdict of its own
    read_after = [ids for ids in engine.prompts if ids[:len(engine.written[0])] == engine.written[0]]
    assert len(read_after) == 1 and read_after[0][-len(slot):] != slot
    assert tokenization.decode(read_after[0]).rstrip().endswith(f"{_written(tokenization, engine.written[0])}\n\n"
                                                      "The response better on Coherence is Response"
                                                      if size == PAIR else "is Response")


def _written(tokenization, prompt_ids):
    listed = RESPONSE.findall(tokenization.decode(prompt_ids))
    return " ".join(f"Response {letter} reads {body!r}." for letter, body in listed)


@pytest.mark.parametrize(("schedule", "k"), SCHEDULES)
def test_sampled_verdicts_are_seeded_by_the_prompt(tokenization, vocabulary, schedule, k):
    mode = Sampling(n=40, temperature=1.0)
    engine = WritingEngine(tokenization)
    result, _ = _judge(engine, tokenization, vocabulary, _group(GROUP, schedule), schedule, k, mode)
    moved_engine = WritingEngine(tokenization)
    moved, _ = _judge(moved_engine, tokenization, vocabulary, _group([GROUP[i] for i in ORDER], schedule),
                      schedule, k, mode)
    _invariant(result, moved)
    assert sorted(engine.sampled) == sorted(moved_engine.sampled)  # the same prompts, the same seeds
    assert len({seed for _, seed in engine.sampled}) == len(engine.sampled) == result.engine_reads
    assert result.generated_tokens == 40 * result.engine_reads and not engine.written
    outcome = result.per_rubric[0].outcome
    assert 0.6 < outcome.label_mass < 1.0  # the answers that were no letter are left out of P(letter)
    assert not result.per_rubric[0].rationales


@pytest.mark.parametrize("mode", [Logprobs(), Reasoning(max_tokens=48), Sampling(n=7)])
@pytest.mark.parametrize(("schedule", "k"), SCHEDULES)
def test_a_dry_run_counts_the_reads_and_makes_none(tokenization, vocabulary, mode, schedule, k):
    engine = WritingEngine(tokenization)
    planned, _ = _judge(engine, tokenization, vocabulary, _group(GROUP, schedule), schedule, k, mode, dry_run=True)
    assert not engine.prompts and not engine.written and not engine.sampled
    assert not planned.per_rubric and planned.rewards == [0.0] * len(GROUP)
    done, _ = _judge(WritingEngine(tokenization), tokenization, vocabulary, _group(GROUP, schedule), schedule, k,
                     mode)
    assert planned.engine_reads == done.engine_reads == cost(schedule, 6, k).reads
    assert planned.prompt_tokens == done.prompt_tokens
    most = {Logprobs: 0, Reasoning: 48, Sampling: 7}[type(mode)]
    assert planned.generated_tokens == most * planned.engine_reads >= done.generated_tokens


def test_a_completion_with_no_room_to_reason_fails_alone(tokenization, vocabulary):
    """Fits the plain comparison's context, not the instruction to write first and the verdict after."""
    long, short = "word " * 120, "Short one."
    plain_engine = WritingEngine(tokenization)
    plain_judge = GroupJudge(plain_engine, tokenization, vocabulary)
    prompt = plain_judge.prompt_for(RUBRIC)
    shared = prompt.shared("An article.", None)
    need = prompt.fixed_tokens(shared) + 2 * len(prompt.response(long))
    tight = WritingEngine(tokenization, max_model_len=need + 1)
    group = Group("An article.", [long, short, "Another."])
    plain, _ = _judge(tight, tokenization, vocabulary, group, Schedule.ALL_PAIRS, 4, Logprobs())
    assert all(failure is None for failure in plain.member_failures)
    reasoned, _ = _judge(WritingEngine(tokenization, need + 1), tokenization, vocabulary, group, Schedule.ALL_PAIRS,
                         4, Reasoning())
    assert reasoned.member_failures[0].field == "groups[0].completions[0]"
    assert "room to reason" in reasoned.member_failures[0].message
    assert reasoned.member_failures[1] is None and reasoned.engine_reads == 2


def test_the_mode_reaches_the_judge_and_the_rationales_the_client():
    group = reward_pb2.Group(text="An article.", completions=["One.", "Two."])
    valid = validate_groups(reward_pb2.ScoreGroupsRequest(
        groups=[group], mode=reward_pb2.SCORING_MODE_REASONING, reasoning=reward_pb2.ReasoningOptions(max_tokens=32),
        dry_run=True), {"summeval-coherence": False}, "summeval-coherence")
    assert valid.mode == Reasoning(max_tokens=32) and valid.dry_run
    valid = validate_groups(reward_pb2.ScoreGroupsRequest(groups=[group]), {"summeval-coherence": False},
                            "summeval-coherence")
    assert valid.mode == Logprobs() and not valid.dry_run
    with pytest.raises(RequestError) as error:
        validate_groups(reward_pb2.ScoreGroupsRequest(groups=[group], mode=reward_pb2.SCORING_MODE_SAMPLING,
                                                      sampling=reward_pb2.SamplingOptions(n=100_000)),
                        {"summeval-coherence": False}, "summeval-coherence")
    assert error.value.field == "sampling.n"


def test_rationales_and_generated_tokens_reach_the_client(tokenization, vocabulary):
    result, _ = _judge(WritingEngine(tokenization), tokenization, vocabulary,
                       Group("An article.", ["Weak.", "Fine summary."], anchor="An anchor text."), Schedule.ANCHOR, 4,
                       Reasoning(max_tokens=400))
    typed = client_group_result(group_result("g", result))
    assert typed.mode == "reasoning" and typed.generated_tokens == result.generated_tokens > 0
    assert typed.engine_reads == 4 and not math.isnan(typed.completions[0].reward)
    rationales = typed.rubrics[0].rationales
    assert {r.listed for r in rationales} == {(0, None), (None, 0), (1, None), (None, 1)}
    assert all("An anchor text." in r.text for r in rationales)
