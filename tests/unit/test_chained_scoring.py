"""The G-Eval scorer issues a rubric's chained label reads (pure logic: a fake engine
answers each read from a table of next-token probabilities), over the fake byte-level
tokenizer where `10` is `1` (or ` 1`) then `0` and ` 6`..` 9` are a space then the
digit. The real embedded judge scores a 1-10 rubric in tests/engine/test_inline_rubrics.py."""

import asyncio
import math

import pytest
from geval_server.scorers.base import JudgeInput
from geval_server.scorers.geval.expected_score import Scale
from geval_server.scorers.geval.rubrics import Rubric, rubric_from_dict
from geval_server.scorers.geval.scorer import GEvalPreparer
from geval_server.scorers.scoring_mode import Logprobs

from tests.unit.fakes import fake_judge

ONE_TO_TEN = {
    "name": "clarity-10", "criterion": "Clarity",
    "task_introduction": "You will be given a question and one answer to it.",
    "evaluation_criteria": "Clarity (1-10) - how easy the answer is to read.",
    "evaluation_steps": "1. Read the answer.\n2. Rate it.",
    "source_label": "Question", "target_label": "Answer",
    "scale": {"min": 1, "max": 10},
}


class TableEngine:
    """Answers a read from `table`: the tokens after the slot -> {token: probability}.
    Records every prompt and the most reads in flight at once."""

    max_model_len = 100_000

    def __init__(self, slot_end: int, table: dict[tuple[int, ...], dict[int, float]]) -> None:
        self.slot_end, self.table = slot_end, table
        self.prompts: list[list[int]] = []
        self.in_flight = self.most_in_flight = 0

    async def token_logprobs(self, prompt_ids, token_ids, *, affinity=None):
        self.prompts.append(list(prompt_ids))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0)
        self.in_flight -= 1
        answer = self.table.get(tuple(prompt_ids[self.slot_end:]), {})
        return {t: math.log(answer[t]) for t in token_ids if answer.get(t, 0.0) > 0.0}


def _token(tokenization, text: str) -> int:
    return tokenization.tokenizer.convert_tokens_to_ids(text.replace(" ", "\u0120"))


def _scorer(tokenization, engine, rubric: Rubric):
    preparer = GEvalPreparer(engine, tokenization, "fake-judge", 0.5, "policy")
    return asyncio.run(preparer.scorer(rubric))


def test_a_one_to_ten_scale_is_read_exactly_with_every_chained_read_in_flight_at_once(tokenization):
    t = {text: _token(tokenization, text) for text in [*"0123456789", " ", " 1", " 5"]}
    table = {
        (): {t["1"]: 0.2, t[" 1"]: 0.1, t[" 5"]: 0.2, t[" "]: 0.4},
        (t[" "],): {t["7"]: 0.5, t["9"]: 0.25},  # ` 7`, ` 9`: a space token, then the digit
        (t["1"],): {t["0"]: 0.6, t["2"]: 0.1},  # `12` is no label: after `1` the number ends with p 0.3
        (t[" 1"],): {t["0"]: 0.5},
    }
    engine = TableEngine(0, table)
    scorer = _scorer(tokenization, engine, rubric_from_dict(ONE_TO_TEN, "test"))
    request = scorer.request(JudgeInput("Why is the sky blue?", "Rayleigh scattering."), "items[0]")
    ids = request.ids
    engine.slot_end = len(ids)

    probs = asyncio.run(scorer._label_probs(request))

    expected = {"1": 0.2 * 0.3 + 0.1 * 0.5, "5": 0.2, "7": 0.4 * 0.5, "9": 0.4 * 0.25, "10": 0.2 * 0.6 + 0.1 * 0.5}
    assert probs == pytest.approx({label: expected.get(label, 0.0) for label in Scale(1, 10).labels}, abs=1e-12)
    reads = scorer.prepared.slot.plan.reads
    assert sorted(engine.prompts) == sorted(ids + list(read.prefix) for read in reads)  # one request per read
    assert engine.most_in_flight == len(reads) == 4

    (score,) = asyncio.run(scorer.score([request], Logprobs()))
    mass = sum(expected.values())
    assert score.estimate.label_mass == pytest.approx(mass)
    assert score.estimate.distribution["10"] == pytest.approx(expected["10"] / mass)
    assert score.estimate.expected_score == pytest.approx(sum(int(k) * p for k, p in expected.items()) / mass)


def test_a_one_to_five_scale_of_single_tokens_stays_one_read(tokenization):
    engine = TableEngine(0, {})
    rubric = rubric_from_dict({**ONE_TO_TEN, "scale": {"min": 1, "max": 5}}, "test")
    scorer = _scorer(tokenization, engine, rubric)
    request = scorer.request(JudgeInput("Q?", "A."), "items[0]")
    ids = request.ids
    engine.slot_end = len(ids)
    engine.table = {(): {_token(tokenization, " 4"): 0.3, _token(tokenization, "4"): 0.1}}
    assert asyncio.run(scorer._label_probs(request)) == pytest.approx({"1": 0, "2": 0, "3": 0, "4": 0.4, "5": 0})
    assert engine.prompts == [ids]


def test_an_inline_one_to_ten_rubric_scores_through_the_judge_with_one_request_per_read():
    judge, engine, _ = fake_judge()
    rubric = rubric_from_dict(ONE_TO_TEN, "rubrics[0]")
    scorer = asyncio.run(judge._resolve([rubric]))[rubric]
    items = [JudgeInput("Why is the sky blue?", text) for text in ("Rayleigh scattering.", "Because.")]
    outcomes = asyncio.run(judge.score(items, [[(scorer, 1.0)]] * 2))
    for outcome in outcomes:
        assert outcome.failure is None
        (item_score,) = outcome.scores
        assert list(item_score.score.estimate.distribution) == [str(v) for v in range(1, 11)]
        assert sum(item_score.score.estimate.distribution.values()) == pytest.approx(1.0)
    assert len(engine.prompts) == 2 * len(scorer.prepared.slot.plan.reads)
