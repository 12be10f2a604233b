"""The listwise schedule through GroupJudge, over the fake byte-level tokenizer and a fake
engine that reads the listed responses back from the prompt: one read per cyclic shift,
order invariance, identical members, the limits, a failed read, and the wire request."""

import asyncio
import math
import re

import pytest
from geval_client.pb import reward_pb2
from geval_server.api.wire import RequestError, validate_groups
from geval_server.defences.boundaries import COMPLETION_TAG
from geval_server.defences.chain import DefenceSettings, defences_for
from geval_server.engine.tokenization import Tokenization
from geval_server.groupwise.plan import Group, Schedule
from geval_server.groupwise.win_matrix import Aggregation
from geval_server.scorers.geval.groups.judge import GroupJudge, GroupRequest
from geval_server.scorers.geval.groups.prompt import ComparisonPrompt
from geval_server.scorers.geval.rubrics import load_rubrics

RESPONSE = re.compile(rf"Response ([A-Z]):\n\n<{COMPLETION_TAG}>\n(.*?)\n</{COMPLETION_TAG}>", re.S)
STRENGTH = {"Fine summary.": 4.0, "Weak.": 1.0, "Good, short summary.": 2.5, "Rambling text here.": 0.5}
TEXTS = list(STRENGTH)


class ListReadingEngine:
    """P(letter) proportional to the strength of the response listed there times a pull
    towards Response A; 0.9 of the mass on the letters. A prompt listing `broken` first fails."""

    max_model_len = 100_000

    def __init__(self, tokenization: Tokenization, first_pull: float = 3.0, broken: str | None = None) -> None:
        self._tok, self.first_pull, self.broken = tokenization, first_pull, broken
        self.prompts: list[list[int]] = []

    async def token_logprobs(self, prompt_ids, token_ids, *, affinity=None):
        self.prompts.append(list(prompt_ids))
        await asyncio.sleep(0)
        listed = RESPONSE.findall(self._tok.decode(list(prompt_ids)))
        if listed[0][1] == self.broken:
            raise RuntimeError("the engine failed this read")
        weights = {letter: STRENGTH.get(text, 1.0) * (self.first_pull if letter == "A" else 1.0)
                   for letter, text in listed}
        total = sum(weights.values())
        letters = {t: self._tok.decode([t]).strip() for t in token_ids}
        return {t: math.log(0.9 * weights[x] / total) for t, x in letters.items() if x in weights}


RUBRIC = load_rubrics()["summeval-coherence"]


def _judge(engine, tokenization, vocabulary, groups, schedule=Schedule.LISTWISE):
    judge = GroupJudge(engine, tokenization, vocabulary)
    request = GroupRequest(groups, [(RUBRIC, 1.0)], schedule, 4, Aggregation.MEAN_WIN_PROBABILITY)
    return asyncio.run(judge.judge(request, defences_for(frozenset(), DefenceSettings()), "fake-judge"))


def test_one_read_per_cyclic_shift_and_the_request_order_changes_no_reward(tokenization, vocabulary):
    engine = ListReadingEngine(tokenization)
    (first,) = _judge(engine, tokenization, vocabulary, [Group("An article.", TEXTS)])
    assert len(engine.prompts) == 4 and first.schedule is Schedule.LISTWISE
    assert all(len(RESPONSE.findall(tokenization.decode(ids))) == 4 for ids in engine.prompts)
    order = [2, 0, 3, 1]
    (again,) = _judge(engine, tokenization, vocabulary, [Group("An article.", [TEXTS[i] for i in order])])
    for k, i in enumerate(order):
        assert again.rewards[k] == pytest.approx(first.rewards[i], abs=1e-12)
    # the pull towards A is shared evenly: it flattens the rewards but keeps their order
    assert sorted(range(4), key=first.rewards.__getitem__) == sorted(range(4), key=lambda i: STRENGTH[TEXTS[i]])
    (unpulled,) = _judge(ListReadingEngine(tokenization, first_pull=1.0), tokenization, vocabulary,
                         [Group("An article.", TEXTS)])
    p_best = [STRENGTH[t] / sum(STRENGTH.values()) for t in TEXTS]
    assert unpulled.rewards == pytest.approx([3 * p / (2 * p + 1) for p in p_best], abs=1e-12)
    outcome = first.per_rubric[0].outcome
    assert outcome.first_position_preference == 0.5  # A leads where 4.0*3 or 2.5*3 stands there
    assert outcome.label_mass == pytest.approx(0.9) and len(first.per_rubric[0].content_hash) == 64


def test_identical_members_get_equal_rewards(tokenization, vocabulary):
    engine = ListReadingEngine(tokenization)
    (group,) = _judge(engine, tokenization, vocabulary, [Group("An article.", [TEXTS[0], TEXTS[1], TEXTS[0]])])
    assert group.rewards[0] == group.rewards[2] and group.rewards[0] > group.rewards[1]
    (same,) = _judge(engine, tokenization, vocabulary, [Group("An article.", [TEXTS[1]] * 3)])
    assert same.rewards == pytest.approx([0.5] * 3)


def test_a_list_of_two_reads_what_all_pairs_reads(tokenization, vocabulary):
    groups = [Group("An article.", TEXTS[:2])]
    listed = _judge(ListReadingEngine(tokenization), tokenization, vocabulary, groups)
    paired = _judge(ListReadingEngine(tokenization), tokenization, vocabulary, groups, Schedule.ALL_PAIRS)
    assert listed[0].rewards == pytest.approx(paired[0].rewards, abs=1e-15)
    assert listed[0].per_rubric[0].content_hash == paired[0].per_rubric[0].content_hash  # the same prompts


def test_a_group_larger_than_the_letters_fails_with_the_limit(tokenization, vocabulary):
    engine = ListReadingEngine(tokenization)
    many = [f"Summary number {i}." for i in range(27)]
    big, fine = _judge(engine, tokenization, vocabulary, [Group("An article.", many), Group("An article.", TEXTS)])
    assert big.failure.code == "INVALID_ARGUMENT" and big.failure.field == "groups[0].completions"
    assert "27 completions exceed the listwise limit of 26" in big.failure.message
    assert fine.failure is None and len(engine.prompts) == 4  # the other group is still read


def test_a_failed_read_fails_every_listed_member(tokenization, vocabulary):
    engine = ListReadingEngine(tokenization, broken=TEXTS[1])
    (group,) = _judge(engine, tokenization, vocabulary, [Group("An article.", TEXTS[:3] + [""])])
    assert group.member_failures[3].field == "groups[0].completions[3]"  # empty: fails alone, not listed
    assert all(group.member_failures[i].code == "INTERNAL" for i in range(3))  # no shift may be missing
    assert "the engine failed this read" in group.member_failures[0].message


def test_a_list_that_does_not_fit_fails_the_group_and_a_long_member_fails_alone(tokenization, vocabulary):
    prompt = ComparisonPrompt(tokenization, vocabulary, RUBRIC)
    shared = prompt.shared("An article.", None)
    lengths = [len(prompt.response(text)) for text in TEXTS]
    engine = ListReadingEngine(tokenization)
    engine.max_model_len = prompt.fixed_tokens(shared, 4) + sum(lengths)  # one token short of the list
    (group,) = _judge(engine, tokenization, vocabulary, [Group("An article.", TEXTS)])
    assert group.failure.field == "groups[0].completions"
    assert "the list of its 4 distinct completions" in group.failure.message
    long = "A summary that goes on. " * 20
    engine.max_model_len = prompt.fixed_tokens(shared) + 2 * len(prompt.response(long))  # a pair of it does not fit
    (group,) = _judge(engine, tokenization, vocabulary, [Group("An article.", [*TEXTS[:3], long])])
    assert group.failure is None and group.member_failures[3].field == "groups[0].completions[3]"
    assert all(failure is None for failure in group.member_failures[:3])


def test_the_wire_request_and_bradley_terry_refused():
    request = reward_pb2.ScoreGroupsRequest(
        groups=[reward_pb2.Group(text="An article.", completions=TEXTS)], schedule=reward_pb2.SCHEDULE_LISTWISE)
    assert validate_groups(request, {"summeval-coherence": False}, "summeval-coherence").schedule is Schedule.LISTWISE
    request.aggregation = reward_pb2.AGGREGATION_BRADLEY_TERRY
    with pytest.raises(RequestError) as error:
        validate_groups(request, {"summeval-coherence": False}, "summeval-coherence")
    assert error.value.field == "aggregation" and "SCHEDULE_LISTWISE" in str(error.value)
