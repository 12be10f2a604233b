"""Reasoning mode's pure parts: where the rationale is cut, how a think block is closed,
what the slot read after the rationale holds (a fake engine records both requests),
the request options and the client's choice of mode. The real judge writing a
rationale is tested in tests/engine/test_reasoning_server.py."""

import asyncio
import math

import pytest
from geval_client import make_item
from geval_client.pb import reward_pb2
from geval_client.requests import score_request
from geval_client.trainers.shared.diagnostics import completion_columns
from geval_client.trainers.shared.sample_rewards import MODE_ENV, SampleScorer
from geval_client.trainers.shared.trl_batch import build_batch
from geval_client.types import Logprobs as ClientLogprobs
from geval_client.types import Reasoning as ClientReasoning
from geval_client.types import Sampling as ClientSampling
from geval_client.types import item_result
from geval_server.api.wire import RequestError, validate
from geval_server.engine.vllm_engine import Generation
from geval_server.scorers.base import JudgeInput
from geval_server.scorers.geval.prompts import FORM_HEADER
from geval_server.scorers.geval.reasoning import rationale_tokens, stops, unclosed_think
from geval_server.scorers.geval.rubrics import load_rubrics
from geval_server.scorers.scoring_mode import Reasoning

from tests.unit.fakes import RecordingEngine, fake_judge

RUBRIC = "summeval-coherence"


class WritingEngine(RecordingEngine):
    """Writes a fixed evaluation (then a form and a score, then the end of the turn) and
    records each generation request; cut=True stops it at its budget instead."""

    def __init__(self, tokenization, written: str, cut: bool = False):
        super().__init__()
        self.tokenization, self.written, self.cut = tokenization, written, cut
        self.generated: list[tuple[list[int], int, tuple[str, ...]]] = []

    async def generate(self, prompt_ids, max_tokens, stop=(), temperature=0.0, *, affinity=None):
        self.generated.append((list(prompt_ids), max_tokens, tuple(stop)))
        await asyncio.sleep(0)
        full = self.written + "\n- Coherence: 5"
        ids = self.tokenization.user(full)
        if self.cut:
            ids = ids[:max_tokens]
            return Generation(self.tokenization.decode(ids), ids, cut=True)
        text = full[:min((full.find(s) for s in stop if s in full), default=len(full))]
        return Generation(text, ids + [0], cut=False)  # vLLM's ids run past the stop string


def _reasoned(written, cut=False, max_tokens=64):
    judge, _, tokenization = fake_judge([RUBRIC])
    engine = WritingEngine(tokenization, written, cut)
    scorer = judge.scorers[RUBRIC]
    scorer._engine = engine
    item = JudgeInput("The article.", "The summary.")
    mode = Reasoning(max_tokens=max_tokens)
    (score,) = asyncio.run(scorer.score([scorer.request(item, "items[0]")], mode))
    return score, engine, tokenization


def test_the_rationale_is_cut_before_the_form_and_the_slot_follows_it():
    score, engine, tokenization = _reasoned("The summary is clear and well ordered.")
    (prompt, max_tokens, stop), = engine.generated
    assert "Coherence:" in stop and max_tokens == 64
    assert tokenization.decode(prompt).endswith(f"then fill in the {FORM_HEADER}\n\n")
    (read,) = engine.prompts
    assert read[:len(prompt)] == prompt  # the slot read repeats the generation's prompt: one cached prefix
    assert tokenization.decode(read[len(prompt):]) == (
        f"The summary is clear and well ordered.\n\n{FORM_HEADER}\n- Coherence:"
    )
    assert score.rationale == "The summary is clear and well ordered."
    assert isinstance(score.mode, Reasoning)
    assert math.isclose(sum(score.estimate.distribution.values()), 1.0)


def test_a_rationale_cut_at_its_budget_is_still_scored_after_it():
    score, engine, tokenization = _reasoned("word " * 50, cut=True, max_tokens=7)
    (read,) = engine.prompts
    prompt = engine.generated[0][0]
    assert len(read) - len(prompt) == 7 + len(tokenization.template(f"\n\n{FORM_HEADER}\n- Coherence:"))
    assert score.rationale == "word wo"  # this tokenizer writes a token per byte
    assert score.estimate.label_mass > 0


def test_a_think_block_left_open_is_closed_before_the_form():
    score, engine, tokenization = _reasoned("<think>The order of events is clear")
    read = tokenization.decode(engine.prompts[0])
    assert read.endswith(f"<think>The order of events is clear\n</think>\n\n{FORM_HEADER}\n- Coherence:")
    assert score.rationale == "<think>The order of events is clear"


def test_think_blocks_open_and_closed():
    assert unclosed_think("<|im_start|>assistant\n<think>\nhmm") == "</think>"
    assert unclosed_think("<think>a</think>\n\nThe summary is fine.") is None
    assert unclosed_think("<think>a</think><think>b") == "</think>"
    assert unclosed_think("<|channel>thought\nhmm") == "<channel|>"
    assert unclosed_think("No thinking here.") is None


def test_the_rationale_keeps_only_the_tokens_before_the_stop_string():
    judge, _, tokenization = fake_judge([RUBRIC])
    ids = tokenization.user("Fine.\n- **Coherence: 4")
    assert tokenization.decode(rationale_tokens(tokenization.decode, ids + [0], "Fine.\n- **")) == "Fine."
    assert rationale_tokens(tokenization.decode, ids, "") == []


def test_the_judge_stops_where_it_starts_the_form_or_a_score():
    rubric = load_rubrics()["topical-chat-engagingness"]
    assert {"Evaluation Form", "Engagingness:", "Score:", "[RESULT]"} <= set(stops(rubric))


def _validate(**kwargs):
    request = reward_pb2.ScoreRequest(items=[make_item("Article.", "Summary.")], **kwargs)
    return validate(request, {RUBRIC: False}, RUBRIC)


def test_reasoning_options_default_to_greedy_and_256_tokens():
    mode = _validate(mode=reward_pb2.SCORING_MODE_REASONING).mode
    assert mode == Reasoning(max_tokens=256, temperature=0.0)


@pytest.mark.parametrize("reasoning, field", [
    (reward_pb2.ReasoningOptions(max_tokens=5000), "reasoning.max_tokens"),
    (reward_pb2.ReasoningOptions(temperature=-1), "reasoning.temperature"),
    (reward_pb2.ReasoningOptions(temperature=math.nan), "reasoning.temperature"),
])
def test_bad_reasoning_options_name_their_field(reasoning, field):
    with pytest.raises(RequestError) as error:
        _validate(mode=reward_pb2.SCORING_MODE_REASONING, reasoning=reasoning)
    assert error.value.field == field


def test_the_client_selects_the_mode_by_its_budget():
    request = score_request([{"prompt": "p", "completion": "c"}], mode=ClientReasoning(128, temperature=0.7))
    assert request.mode == reward_pb2.SCORING_MODE_REASONING
    assert (request.reasoning.max_tokens, request.reasoning.temperature) == (128, pytest.approx(0.7))
    assert not request.HasField("sampling")  # one mode per request
    with pytest.raises(TypeError, match="mode must be"):
        score_request([{"prompt": "p", "completion": "c"}], mode="reasoning")


def test_rationales_reach_the_completions_table_only_in_reasoning_mode():
    def scored(*rationales):
        return item_result(reward_pb2.ItemResult(scores=[
            reward_pb2.RubricScore(rubric=rubric, geval=reward_pb2.GEvalResult(rationale=rationale))
            for rubric, rationale in rationales
        ]))

    reasoned = scored(("a", "Clear."))
    two = scored(("a", "Clear."), ("b", "Off topic."))
    batch = build_batch(["p", "p"], ["x", "y"], None, {})
    assert completion_columns(batch, [reasoned, two])["rationale"] == ["Clear.", "[a] Clear.\n\n[b] Off topic."]
    plain = scored(("a", ""))
    assert "rationale" not in completion_columns(build_batch(["p"], ["x"], None, {}), [plain])


def test_openrlhf_and_verl_take_the_mode_from_an_option_or_the_environment(monkeypatch):
    monkeypatch.delenv(MODE_ENV, raising=False)
    assert SampleScorer.configure("judge:1").mode == ClientLogprobs()
    assert SampleScorer.configure("judge:1", mode=ClientReasoning(64)).mode == ClientReasoning(64)
    assert SampleScorer.configure("judge:1", mode="reasoning:64").mode == ClientReasoning(64)
    assert SampleScorer.configure("judge:1", mode="sampling:8").mode == ClientSampling(8)
    monkeypatch.setenv(MODE_ENV, "reasoning:128")
    assert SampleScorer.configure("judge:1").mode == ClientReasoning(128)
    monkeypatch.setenv(MODE_ENV, "many")
    with pytest.raises(ValueError, match=MODE_ENV):
        SampleScorer.configure("judge:1")
