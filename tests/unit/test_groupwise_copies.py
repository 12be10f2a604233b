"""Copies of one completion in a group, through GroupJudge with the fake byte-level
tokenizer and a fake engine that reads the listed responses back from the prompt: copies
get exactly equal rewards under every schedule and aggregation, are read once, and the
request's order still changes nothing."""

import asyncio
import math
import re

import pytest
from geval_server.defences.boundaries import COMPLETION_TAG
from geval_server.defences.chain import DefenceSettings, defences_for
from geval_server.engine.tokenization import Tokenization
from geval_server.groupwise.plan import Group, Schedule, distinct
from geval_server.groupwise.win_matrix import Aggregation
from geval_server.scorers.geval.groups.judge import GroupJudge, GroupRequest
from geval_server.scorers.geval.rubrics import load_rubrics

RESPONSE = re.compile(rf"Response ([A-Z]):\n\n<{COMPLETION_TAG}>\n(.*?)\n</{COMPLETION_TAG}>", re.S)
STRENGTH = {"Fine summary.": 4.0, "Weak.": 1.0, "Good, short summary.": 2.5, "Rambling text here.": 0.5,
            "An anchor text.": 1.5}
RUBRIC = load_rubrics()["summeval-coherence"]
# "Fine summary." twice and "Weak." three times among six distinct texts: the copies stand
# apart in the canonical order's cycle, so with k=1 they would meet different neighbours
GROUP = ["Fine summary.", "Weak.", "Good, short summary.", "Weak.", "Rambling text here.", "Fine summary.",
         "Weak.", "Other text one.", "Another text, the second."]
COPIES = [(0, 5), (1, 3, 6)]


class StrengthEngine:
    """P(letter) proportional to the strength of the response listed there, times a pull
    towards Response A and an uneven nudge per text so that no two pairs read alike."""

    max_model_len = 100_000

    def __init__(self, tokenization: Tokenization) -> None:
        self._tok = tokenization
        self.prompts: list[list[int]] = []

    async def token_logprobs(self, prompt_ids, token_ids, *, affinity=None):
        self.prompts.append(list(prompt_ids))
        await asyncio.sleep(0)
        listed = RESPONSE.findall(self._tok.decode(list(prompt_ids)))
        weights = {letter: (STRENGTH.get(text, 1.0) + 0.01 * len(text)) * (2.0 if letter == "A" else 1.0)
                   for letter, text in listed}
        total = sum(weights.values())
        letters = {t: self._tok.decode([t]).strip() for t in token_ids}
        return {t: math.log(0.9 * weights[x] / total) for t, x in letters.items() if x in weights}


def _judge(engine, tokenization, vocabulary, groups, schedule, neighbours=4,
           aggregation=Aggregation.MEAN_WIN_PROBABILITY):
    judge = GroupJudge(engine, tokenization, vocabulary)
    request = GroupRequest(groups, [(RUBRIC, 1.0)], schedule, neighbours, aggregation)
    return asyncio.run(judge.judge(request, defences_for(frozenset(), DefenceSettings()), "fake-judge"))


CASES = [(Schedule.ALL_PAIRS, 4, aggregation) for aggregation in Aggregation] + [
    (Schedule.NEIGHBOURS, k, aggregation) for k in (1, 2) for aggregation in Aggregation] + [
    (Schedule.ANCHOR, 4, Aggregation.MEAN_WIN_PROBABILITY), (Schedule.LISTWISE, 4, Aggregation.MEAN_WIN_PROBABILITY)]


@pytest.mark.parametrize(("schedule", "k", "aggregation"), CASES)
def test_copies_get_exactly_equal_rewards(tokenization, vocabulary, schedule, k, aggregation):
    group = Group("An article.", GROUP, anchor="An anchor text." if schedule is Schedule.ANCHOR else None)
    engine = StrengthEngine(tokenization)
    (result,) = _judge(engine, tokenization, vocabulary, [group], schedule, k, aggregation)
    assert result.failure is None and all(failure is None for failure in result.member_failures)
    for same in COPIES:
        assert len({result.rewards[i] for i in same}) == 1, [result.rewards[i] for i in same]
    assert len(set(result.rewards)) == 6  # the distinct texts still differ
    # each copy is read once: no prompt lists a text twice, none is read twice
    assert len({tuple(ids) for ids in engine.prompts}) == len(engine.prompts) == result.engine_reads
    for ids in engine.prompts:
        listed = [text for _, text in RESPONSE.findall(tokenization.decode(ids))]
        assert len(set(listed)) == len(listed)
    outcome = result.per_rubric[0].outcome
    if schedule in (Schedule.ALL_PAIRS, Schedule.NEIGHBOURS):  # copies tie with each other, share their pairs
        assert outcome.win_matrix[1][3] == outcome.win_matrix[3][6] == 0.5
        assert outcome.win_matrix[0][2] == outcome.win_matrix[5][2] is not None
    # the request's order changes nothing
    order = [4, 8, 0, 6, 2, 5, 1, 7, 3]
    moved = Group(group.prompt, [GROUP[i] for i in order], anchor=group.anchor)
    (again,) = _judge(StrengthEngine(tokenization), tokenization, vocabulary, [moved], schedule, k, aggregation)
    assert [again.rewards[order.index(i)] for i in range(len(GROUP))] == result.rewards


def test_distinct_puts_copies_under_their_first_member():
    """The representative is the lowest index holding the text; failed members are left out."""
    assert distinct(GROUP, range(len(GROUP))) == {
        0: (0, 5), 1: (1, 3, 6), 2: (2,), 4: (4,), 7: (7,), 8: (8,)}
    assert distinct(GROUP, [3, 5, 6]) == {5: (5,), 3: (3, 6)}


def test_a_failed_read_fails_every_copy(tokenization, vocabulary):
    class Broken(StrengthEngine):
        async def token_logprobs(self, prompt_ids, token_ids, *, affinity=None):
            listed = [text for _, text in RESPONSE.findall(self._tok.decode(list(prompt_ids)))]
            if "Weak." in listed and "Fine summary." in listed:
                raise RuntimeError("this pair's read failed")
            return await super().token_logprobs(prompt_ids, token_ids)

    (result,) = _judge(Broken(tokenization), tokenization, vocabulary, [Group("An article.", GROUP)],
                       Schedule.ALL_PAIRS)
    assert [i for i, failure in enumerate(result.member_failures) if failure is not None] == [0, 1, 3, 5, 6]


@pytest.mark.parametrize("schedule", [Schedule.ALL_PAIRS, Schedule.NEIGHBOURS, Schedule.LISTWISE, None])
def test_a_lone_completion_is_reported_as_alone(tokenization, vocabulary, schedule):
    groups = [Group("An article.", ["Fine summary."]), Group("An article.", ["Weak."] * 3),
              Group("An article.", ["Weak.", "", "  "]), Group("An article.", ["Weak.", "Fine summary."])]
    engine = StrengthEngine(tokenization)
    one, copies, others_failed, pair = _judge(engine, tokenization, vocabulary, groups, schedule)
    for result in (one, copies, others_failed):
        assert result.alone and result.engine_reads == 0 and result.prompt_tokens == 0
        assert result.rewards[0] == 0.5 and result.per_rubric[0].outcome.position_consistency is None
    assert copies.rewards == [0.5] * 3 and others_failed.member_failures[1].field == "groups[2].completions[1]"
    assert not pair.alone and pair.engine_reads == 2


def test_against_an_anchor_a_lone_completion_is_not_alone(tokenization, vocabulary):
    (result,) = _judge(StrengthEngine(tokenization), tokenization, vocabulary,
                       [Group("An article.", ["Weak."], anchor="An anchor text.")], Schedule.ANCHOR)
    assert not result.alone and result.engine_reads == 2 and result.rewards[0] < 0.5
