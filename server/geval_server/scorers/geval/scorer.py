"""The G-Eval scorer: the judge reads a rubric's prompt and we read its answer at
the score slot, either as the exact probability of every score label
(log-probability mode), as n sampled answers (sampling mode), or as the exact
probabilities after the judge has written its evaluation (reasoning mode)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from geval_client.pb import reward_pb2

from geval_server import metrics
from geval_server.engine.protocol import JudgeEngine
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.base import ItemFailure, JudgeInput, ScorerInfo
from geval_server.scorers.geval.autocot import ensure_steps
from geval_server.scorers.geval.expected_score import ScoreEstimate, estimate, estimate_from_samples
from geval_server.scorers.geval.prompts import PromptBuilder, PromptParts, form_text
from geval_server.scorers.geval.reasoning import ReasoningLayout, reasoning_layout, write_then_read
from geval_server.scorers.geval.rubrics import Rubric
from geval_server.scorers.geval.slot import LabelVocabulary, ScoreSlot, find_score_slot
from geval_server.scorers.scoring_mode import Logprobs, Reasoning, ScoringMode

if TYPE_CHECKING:
    from geval_server.groupwise.comparer import Comparer

KIND = "geval"
SAMPLED_TOKENS = 4  # a sampled answer is read from its first few tokens
# Engine requests per item at the score slot: a 1-10 scale takes 2 (SmolLM2, Qwen), 0-100 about 12;
# a scale whose labels need more is refused, so one caller's rubric cannot multiply the engine's work.
MAX_LABEL_READS = 32


@dataclass(frozen=True)
class GEvalScore:
    """The label distribution read at the slot, each label's value (a scale's number, a
    template's choice its rank), how it was read, and in reasoning mode the judge's own
    evaluation before it. A judge template's read is one too: both travel as GEvalResult."""

    estimate: ScoreEstimate
    mode: ScoringMode
    values: tuple[float, ...]  # each label's value, in the labels' order
    rationale: str = ""

    @property
    def reward(self) -> float:
        return self.estimate.reward

    def wire(self) -> dict:
        estimate = self.estimate
        return {"geval": {
            "expected_score": estimate.expected_score,
            "distribution": [{"label": label, "value": value, "probability": p}
                             for (label, p), value in zip(estimate.distribution.items(), self.values)],
            "label_mass": estimate.label_mass, "low_confidence": estimate.low_confidence,
            "top_label": estimate.top_label, "mode": self.mode.wire, "rationale": self.rationale,
        }}


@dataclass(frozen=True)
class GEvalDetails:
    """A G-Eval rubric as GetInfo describes it."""

    criterion: str
    task_introduction: str
    evaluation_criteria: str
    evaluation_steps: str
    steps_generated: bool
    labels: tuple[str, ...]

    def wire(self) -> dict:
        return {"kind": reward_pb2.SCORER_KIND_GEVAL, "geval": reward_pb2.GEvalRubric(
            criterion=self.criterion, task_introduction=self.task_introduction,
            evaluation_criteria=self.evaluation_criteria, evaluation_steps=self.evaluation_steps or "",
            steps_generated=self.steps_generated, labels=self.labels,
        )}


@dataclass(frozen=True)
class PreparedRubric:
    """A rubric as the judge reads it: its score slot, its prompt builder, its reasoning-mode
    pieces, and the hash of everything that shapes the prompt."""

    rubric: Rubric
    slot: ScoreSlot
    builder: PromptBuilder
    content_hash: str
    reasoning: ReasoningLayout


def prepare_rubric(
    tokenization: Tokenization, vocabulary: LabelVocabulary, rubric: Rubric, judge_model: str, policy: str
) -> PreparedRubric:
    """The one way a rubric (with its evaluation steps) becomes a served one. `policy`
    names whatever else changes what the judge reads (score-claim removal), so that it
    is part of the content hash."""
    slot = find_score_slot(
        tokenization, vocabulary, form_text(tokenization, rubric), rubric.scale.labels, max_reads=MAX_LABEL_READS
    )
    builder = PromptBuilder(tokenization, rubric, slot.ids)
    reasoning = reasoning_layout(tokenization, vocabulary, rubric, slot)
    layout = f"{builder.layout_fingerprint()}:{reasoning.fingerprint()}"
    content_hash = rubric.content_hash(judge_model, f"{layout}:{policy}")
    return PreparedRubric(rubric, slot, builder, content_hash, reasoning)


class GEvalScorer:
    kind: ClassVar[str] = KIND
    reads_score_slot: ClassVar[bool] = True
    can_gate: ClassVar[bool] = False

    def __init__(self, prepared: PreparedRubric, engine: JudgeEngine, low_confidence_below: float,
                 comparer: Comparer | None = None) -> None:
        """comparer: how groups compare on it (groups/comparer.py), where the judge can compare."""
        self.prepared = prepared
        self.name = prepared.rubric.name
        self.needs_reference = prepared.rubric.uses_reference
        self.content_hash = prepared.content_hash
        self._engine = engine
        self._low_confidence_below = low_confidence_below
        self.comparer = comparer

    def request(self, item: JudgeInput, where: str) -> PromptParts:
        parts = self.prepared.builder.build(item)
        limit = self._engine.max_model_len - SAMPLED_TOKENS
        if len(parts) > limit:
            sizes = {
                f"{where}.prompt": parts.prompt_tokens,
                f"{where}.completion": parts.completion_tokens,
                f"{where}.reference": parts.reference_tokens,
            }
            largest = max(sizes, key=sizes.__getitem__)
            raise ItemFailure(
                "INVALID_ARGUMENT",
                f"the judge prompt for rubric {self.name!r} is {len(parts)} tokens, over the judge's "
                f"limit of {limit} (max_model_len {self._engine.max_model_len}); {largest} alone is "
                f"{sizes[largest]} tokens",
                largest,
            )
        return parts

    async def score(self, requests: Sequence[PromptParts], mode: ScoringMode) -> list[GEvalScore | BaseException]:
        # Submitted grouped by source (and reference): prompts that share a prefix reach vLLM
        # side by side, so its prefix cache computes that prefix once.
        # gather cancels them all when the call is cancelled (a deadline), and vLLM aborts them.
        order = sorted(range(len(requests)), key=lambda i: requests[i].texts[:2])
        results = await asyncio.gather(*(self._score_one(requests[i], mode) for i in order),
                                       return_exceptions=True)
        label_mass = metrics.LABEL_MASS.labels(self.name)
        for result in results:
            if isinstance(result, GEvalScore):
                label_mass.observe(result.estimate.label_mass)
        by_request = dict(zip(order, results))
        return [by_request[i] for i in range(len(requests))]

    async def _score_one(self, parts: PromptParts, mode: ScoringMode) -> GEvalScore:
        rubric = self.prepared.rubric
        if isinstance(mode, Logprobs):
            probs = await self._label_probs(parts)
            return GEvalScore(estimate(probs, rubric.scale, self._low_confidence_below), mode, rubric.scale.values)
        if isinstance(mode, Reasoning):
            return await self._reasoned(parts, mode)
        samples = await self._engine.sample(parts.ids, mode.n, mode.temperature, SAMPLED_TOKENS,
                                            affinity=parts.affinity)
        score = estimate_from_samples(samples, rubric.scale, self._low_confidence_below)
        return GEvalScore(score, mode, rubric.scale.values)

    async def _reasoned(self, parts: PromptParts, reasoning: Reasoning) -> GEvalScore:
        """The judge writes its evaluation after the completion (within its budget and the
        room its context leaves), then the labels are read at the slot after it."""
        layout = self.prepared.reasoning
        ids = parts.ids
        prompt = ids[:len(ids) - len(self.prepared.slot.ids)] + layout.ask_ids
        budget = layout.budget(len(prompt), self._engine.max_model_len, reasoning.max_tokens)
        if budget < 1:
            raise ItemFailure(
                "INVALID_ARGUMENT",
                f"the judge prompt for rubric {self.name!r} in reasoning mode is {len(prompt)} tokens, leaving no "
                f"room for an evaluation within the judge's max_model_len of {self._engine.max_model_len}",
            )
        reasoned = await write_then_read(self._engine, layout, self.prepared.slot.plan, prompt, budget,
                                         reasoning.temperature, parts.affinity)
        score = estimate(reasoned.probabilities, self.prepared.rubric.scale, self._low_confidence_below)
        return GEvalScore(score, reasoning, self.prepared.rubric.scale.values, reasoned.rationale)

    async def _label_probs(self, parts: PromptParts) -> dict[str, float]:
        return await self.prepared.slot.plan.read(self._engine, parts.ids, parts.affinity)

    def info(self) -> ScorerInfo:
        rubric = self.prepared.rubric
        details = GEvalDetails(
            criterion=rubric.criterion, task_introduction=rubric.task_introduction,
            evaluation_criteria=rubric.evaluation_criteria, evaluation_steps=rubric.evaluation_steps,
            steps_generated=rubric.steps_generated, labels=rubric.scale.labels,
        )
        return ScorerInfo(
            name=rubric.name, kind=self.kind, min_score=rubric.scale.min_score, max_score=rubric.scale.max_score,
            higher_is_better=rubric.scale.higher_is_better, uses_reference=rubric.uses_reference,
            content_hash=self.content_hash, details=details,
        )


class GEvalPreparer:
    """Turns rubrics into G-Eval scorers on one judge: the served ones at start-up,
    callers' inline ones as they arrive."""

    def __init__(
        self, engine: JudgeEngine, tokenization: Tokenization, judge_model: str, low_confidence_below: float,
        policy: str,
    ) -> None:
        self._engine = engine
        self._tokenization = tokenization
        self.vocabulary = LabelVocabulary(tokenization)  # once per tokenizer: it walks the vocabulary
        self._judge_model = judge_model
        self._low_confidence_below = low_confidence_below
        self._policy = policy
        self.comparer: Comparer | None = None  # how its scorers compare in groups, where the judge can (kind.py)

    async def scorer(self, rubric: Rubric) -> GEvalScorer:
        """Evaluation steps generated where missing (an engine request), then prepared."""
        completed = await ensure_steps(self._engine, self._tokenization, self._judge_model, rubric)
        prepared = prepare_rubric(self._tokenization, self.vocabulary, completed, self._judge_model, self._policy)
        return GEvalScorer(prepared, self._engine, self._low_confidence_below, self.comparer)
