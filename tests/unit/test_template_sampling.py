"""A template in sampling mode (scorers/template/scorer.py), over a fake engine that answers
given replies: n replies sampled after the pre-filled verdict, each giving the label it
writes first, their mean the score as G-Eval's sampling mode gives it; a pairwise template
samples both orders; a reasoning template's replies are read after the verdict the judge
writes itself, a reply without one giving no label. Results carry each label's value."""

import asyncio

import pytest
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.base import JudgeInput
from geval_server.scorers.geval.expected_score import Scale
from geval_server.scorers.geval.scorer import SAMPLED_TOKENS
from geval_server.scorers.geval.slot import LabelVocabulary
from geval_server.scorers.scoring_mode import Sampling
from geval_server.scorers.template.labels import Choices, sampled_label
from geval_server.scorers.template.scorer import TemplateScorer, prepare_template
from geval_server.scorers.template.spec import spec_from_dict

from tests.unit.fakes import SpaceDigitTokenizer

FIVE = {"name": "five", "template": "Q: {prompt}\nA: {completion}", "verdict": "Score:", "scale": {"min": 1, "max": 5}}
CRITIC = {"name": "critic", "template": "Q: {prompt}\nA: {a}\nB: {b}", "verdict": "[[", "choices": ["B", "A"]}
REASONING = {"name": "why", "template": "Rate: {completion}", "verdict": "<answer>", "reasoning": True,
             "scale": {"min": 1, "max": 5}}


class SamplingEngine:
    """Answers each sample call with the next of `replies` (each a list of n texts), recording its arguments."""

    max_model_len = 100_000

    def __init__(self, *replies):
        self.replies, self.calls = list(replies), []

    async def sample(self, prompt_ids, n, temperature, max_tokens, seed=None, *, affinity=None):
        self.calls.append((list(prompt_ids), n, temperature, max_tokens))
        return self.replies.pop(0)[:n]


def _score(spec, engine, item, n):
    tokenization = Tokenization(SpaceDigitTokenizer())
    prepared = prepare_template(tokenization, LabelVocabulary(tokenization), spec_from_dict(spec, "t"), "fake", "p")
    scorer = TemplateScorer(prepared, engine, 0.5, None)
    request = scorer.request(item, "items[0]")
    (score,) = asyncio.run(scorer.score([request], Sampling(n=n, temperature=0.7)))
    if isinstance(score, BaseException):
        raise score
    return scorer, request, score


def test_a_scale_is_sampled_after_the_pre_filled_verdict_and_its_labels_averaged():
    engine = SamplingEngine([" 4", " 5", " 4 because", " great"])
    scorer, request, score = _score(FIVE, engine, JudgeInput("Q?", "A."), 4)
    assert engine.calls == [(request.ids, 4, 0.7, SAMPLED_TOKENS)]  # the prompt ends with the verdict
    assert score.estimate.distribution["4"] == pytest.approx(2 / 3) and score.estimate.label_mass == 0.75
    assert score.estimate.expected_score == pytest.approx(13 / 3) and score.mode == Sampling(n=4, temperature=0.7)
    wired = score.wire()["geval"]
    assert [entry["value"] for entry in wired["distribution"]] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_a_pairwise_template_samples_both_orders_and_values_its_choices_by_rank():
    engine = SamplingEngine(["A]]", "A]]", "B]]", "A]]"], ["B]]", "B]]", "B]]", "A]]"])
    _, _, score = _score(CRITIC, engine, JudgeInput("Q?", "mine", reference="theirs"), 4)
    assert len(engine.calls) == 2
    # P(A) placed first 3/4; placed second it wins by B: 3/4; both orders averaged
    assert score.reward == pytest.approx(0.75)
    assert [entry["value"] for entry in score.wire()["geval"]["distribution"]] == [0.0, 1.0]


def test_a_reasoning_template_is_read_after_the_verdict_the_judge_writes():
    replies = ["Fine. <answer>4</answer>", "The text says <answer>1 but it is good. <answer>5", "No verdict here."]
    engine = SamplingEngine(replies)
    scorer, request, score = _score(REASONING, engine, JudgeInput("Q?", "The answer. <answer>1</answer>"), 3)
    ((prompt, _, _, max_tokens),) = engine.calls
    assert prompt == scorer.prepared.prompt.without_slot(request) and max_tokens > SAMPLED_TOKENS
    # the first verdict the judge writes decides; the candidate's own <answer>1 is in the prompt, never read
    assert score.estimate.distribution == pytest.approx({"1": 0.5, "2": 0.0, "3": 0.0, "4": 0.5, "5": 0.0})
    assert score.estimate.label_mass == pytest.approx(2 / 3)


@pytest.mark.parametrize(("text", "labels", "label"), [
    (" 4", Scale(1, 5), "4"), ("10/10", Scale(1, 10), "10"), ("7", Scale(1, 5), None),
    ("A]]", Choices(("B", "C", "A")), "A"), (" C", Choices(("B", "C", "A")), "C"), ("tie", Choices(("B", "A")), None),
])
def test_a_sampled_reply_gives_the_label_it_begins_with(text, labels, label):
    assert sampled_label(text, labels) == label
