"""The judge's request plan (pure logic, a fake engine records what reaches it):
identical items in a batch become one engine request, and requests reach the
engine in token order so items that share a prompt sit side by side for vLLM's
prefix cache. The real engine's speed is measured in benchmarks/, not here."""


import pytest
from geval_server.scorers.base import JudgeInput

from tests.unit.fakes import fake_judge, score_all

RUBRIC = "summeval-coherence"


@pytest.fixture
def judge_and_engine():
    return fake_judge([RUBRIC])


def test_identical_items_are_scored_once_and_every_copy_gets_the_result(judge_and_engine):
    judge, engine, tokenization = judge_and_engine
    a = JudgeInput("Article one.", "Summary A.")
    b = JudgeInput("Article one.", "Summary B.")
    c = JudgeInput("Article two.", "Summary A.")
    items = [a, b, a, c, b, a]

    outcomes = score_all(judge, items, [RUBRIC])

    assert len(engine.prompts) == 3
    assert len({tuple(p) for p in engine.prompts}) == 3
    assert all(o.failure is None and len(o.scores) == 1 for o in outcomes)
    assert outcomes[0].scores == outcomes[2].scores == outcomes[5].scores
    assert outcomes[1].scores == outcomes[4].scores


def test_requests_reach_the_engine_in_token_order_grouped_by_prompt(judge_and_engine):
    judge, engine, tokenization = judge_and_engine
    articles = ["Zebra article text.", "Apple article text.", "Mango article text."]
    # groups interleaved; no numerals, so no masked second read (judge.py) joins these requests
    items = [JudgeInput(articles[i % 3], f"Completion {'abcdefghi'[i]}.") for i in range(9)]

    score_all(judge, items, [RUBRIC])

    assert engine.prompts == sorted(engine.prompts)
    decoded = [tokenization.decode(p) for p in engine.prompts]
    order = [next(a for a in articles if a in text) for text in decoded]
    assert [order[0]] * 3 + [order[3]] * 3 + [order[6]] * 3 == order  # each prompt's items adjacent
