"""What a group's judging read, as each GroupResult reports it: the count matches the
schedule's documented cost (plan.cost), the tokens are the prompts' lengths, and a read
that two groups of one call share counts for each."""

import asyncio

import pytest
from geval_server.defences.chain import DefenceSettings, defences_for
from geval_server.groupwise.plan import Group, Schedule, cost
from geval_server.groupwise.win_matrix import Aggregation
from geval_server.scorers.geval.groups.judge import GroupJudge, GroupRequest
from geval_server.scorers.geval.rubrics import load_rubrics

from tests.unit.test_groupwise_copies import StrengthEngine

RUBRICS = load_rubrics()
TEXTS = [f"Summary {word}." for word in ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                                         "ten", "eleven", "twelve")]


def _judge(engine, tokenization, vocabulary, groups, schedule, neighbours=4, rubrics=("summeval-coherence",)):
    judge = GroupJudge(engine, tokenization, vocabulary)
    request = GroupRequest(groups, [(RUBRICS[name], 1.0) for name in rubrics], schedule, neighbours,
                           Aggregation.MEAN_WIN_PROBABILITY)
    return asyncio.run(judge.judge(request, defences_for(frozenset(), DefenceSettings()), "fake-judge"))


@pytest.mark.parametrize(("schedule", "n", "k", "reads"), [
    (Schedule.ALL_PAIRS, 5, 4, 20), (None, 8, 4, 56), (None, 12, 4, 96), (Schedule.NEIGHBOURS, 12, 1, 24),
    (Schedule.NEIGHBOURS, 5, 2, 20), (Schedule.ANCHOR, 5, 4, 10), (Schedule.LISTWISE, 6, 4, 6)])
def test_reads_match_the_schedules_cost(tokenization, vocabulary, schedule, n, k, reads):
    assert cost(schedule, n, k).reads == reads
    engine = StrengthEngine(tokenization)
    (result,) = _judge(engine, tokenization, vocabulary, [Group("An article.", TEXTS[:n], anchor="An anchor.")],
                       schedule, k)
    assert result.engine_reads == reads == len(engine.prompts)
    assert result.prompt_tokens == sum(len(ids) for ids in engine.prompts)


def test_two_rubrics_copies_and_a_shared_read(tokenization, vocabulary):
    engine = StrengthEngine(tokenization)
    rubrics = ("summeval-coherence", "summeval-fluency")
    same = Group("An article.", TEXTS[:4])
    with_copies = Group("An article.", [*TEXTS[:4], TEXTS[0], TEXTS[2]])
    a, b, c = _judge(engine, tokenization, vocabulary, [same, same, with_copies], Schedule.ALL_PAIRS,
                     rubrics=rubrics)
    assert a.engine_reads == b.engine_reads == c.engine_reads == 2 * 12  # 4 distinct texts, 2 rubrics
    assert a.prompt_tokens == b.prompt_tokens == c.prompt_tokens
    assert len(engine.prompts) == 24  # the engine read each prompt once; every group counts it
    assert cost(None, 4).pairs == 6 and cost(Schedule.NEIGHBOURS, 20, 4) == cost(None, 20)
    assert cost(Schedule.ANCHOR, 1).reads == 2 and cost(Schedule.LISTWISE, 1).reads == 0
