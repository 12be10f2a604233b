"""Scores items with the judge: one engine request per (item, rubric), all in
flight together so vLLM batches them.

Requests are deduplicated (identical prompts are scored once) and submitted in
token order, so items that share a prefix (rubric, input, reference) reach the
engine next to each other and its prefix cache computes that prefix once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass, field
from enum import Enum

from .autocot import ensure_steps
from .engine import JudgeEngine
from .labels import LabelVocabulary, ScoreSlot, find_score_slot
from .prompts import JudgeInput, PromptBuilder, PromptParts, Tokenization, form_text
from .rubrics import Rubric
from .score_claims import ScoreClaimRedactor
from .semscore import reward_from_cosine
from .scoring import NoLabelMass, ScoreEstimate, estimate, estimate_from_samples, label_probs_from_logprobs, weighted_reward

log = logging.getLogger(__name__)

SAMPLED_TOKENS = 4  # a sampled answer is read from its first few tokens


class Mode(Enum):
    LOGPROBS = "logprobs"
    SAMPLING = "sampling"
    EMBEDDING = "embedding"  # SemScore results; not a judge mode


SEMSCORE = "semscore"


@dataclass(frozen=True)
class Sampling:
    n: int = 20
    temperature: float = 1.0


class ItemFailure(Exception):
    """One item (or one of its rubrics) could not be scored; the batch goes on."""

    def __init__(self, code: str, message: str, field: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field


@dataclass(frozen=True)
class ServedRubric:
    rubric: Rubric
    slot: ScoreSlot
    builder: PromptBuilder
    content_hash: str


@dataclass(frozen=True)
class RubricScore:
    rubric: str
    estimate: ScoreEstimate
    mode: Mode


@dataclass
class ItemOutcome:
    reward: float = 0.0
    scores: list[RubricScore] = field(default_factory=list)
    failure: ItemFailure | None = None
    score_claims_removed: int = 0


class Judge:
    def __init__(
        self,
        engine: JudgeEngine,
        tokenization: Tokenization,
        rubrics: dict[str, ServedRubric],
        judge_model: str,
        low_confidence_below: float,
        semscorer=None,
        redactor: ScoreClaimRedactor | None = None,
    ) -> None:
        self.engine = engine
        self.tokenization = tokenization
        self.rubrics = rubrics
        self.judge_model = judge_model
        self.low_confidence_below = low_confidence_below
        self.semscorer = semscorer  # SemScore beside the judge, when served
        self.redactor = redactor  # blanks score claims in completions; None keeps them

    @property
    def needs_reference(self) -> dict[str, bool]:
        """Every scorer name served, and whether it needs the item's reference."""
        served = {name: s.rubric.uses_reference for name, s in self.rubrics.items()}
        if self.semscorer is not None:
            served[SEMSCORE] = True
        return served

    @classmethod
    async def prepare(
        cls,
        engine: JudgeEngine,
        tokenizer,
        judge_model: str,
        rubrics: dict[str, Rubric],
        low_confidence_below: float,
        semscorer=None,
        remove_score_claims: bool = True,
    ) -> "Judge":
        """Freezes each rubric: evaluation steps (generated where missing), score slot, prefix.
        remove_score_claims: blank `Criterion: 5` claims in completions (score_claims.py)."""
        tokenization = Tokenization(tokenizer)
        vocabulary = LabelVocabulary(tokenization)
        completed = await asyncio.gather(
            *(ensure_steps(engine, tokenization, judge_model, r) for r in rubrics.values())
        )
        served = {}
        # Removing claims changes what the judge reads, so it is part of the layout's hash.
        policy = "score-claims-removed" if remove_score_claims else "score-claims-kept"
        for rubric in completed:
            slot = find_score_slot(
                tokenization, vocabulary, form_text(tokenization, rubric), rubric.scale.labels
            )
            builder = PromptBuilder(tokenization, rubric, slot.ids)
            served[rubric.name] = ServedRubric(
                rubric=rubric,
                slot=slot,
                builder=builder,
                content_hash=rubric.content_hash(judge_model, f"{builder.layout_fingerprint()}:{policy}"),
            )
        redactor = ScoreClaimRedactor(r.criterion for r in completed) if remove_score_claims and completed else None
        return cls(engine, tokenization, served, judge_model, low_confidence_below, semscorer, redactor)

    def _prompt(self, index: int, item: JudgeInput, served: ServedRubric) -> list[int]:
        parts: PromptParts = served.builder.build(item)
        limit = self.engine.max_model_len - SAMPLED_TOKENS
        if len(parts.ids) > limit:
            sizes = {
                f"items[{index}].prompt": parts.prompt_tokens,
                f"items[{index}].completion": parts.completion_tokens,
                f"items[{index}].reference": parts.reference_tokens,
            }
            largest = max(sizes, key=sizes.__getitem__)
            raise ItemFailure(
                "INVALID_ARGUMENT",
                f"the judge prompt for rubric {served.rubric.name!r} is {len(parts.ids)} tokens, over "
                f"the judge's limit of {limit} (max_model_len {self.engine.max_model_len}); "
                f"{largest} alone is {sizes[largest]} tokens",
                largest,
            )
        return parts.ids

    async def _score_one(
        self, ids: list[int], served: ServedRubric, mode: Mode, sampling: Sampling
    ) -> RubricScore:
        rubric = served.rubric
        if mode is Mode.LOGPROBS:
            logprobs = await self.engine.token_logprobs(ids, served.slot.all_label_token_ids)
            probs = label_probs_from_logprobs(logprobs, served.slot.label_tokens)
            result = estimate(probs, rubric.scale, self.low_confidence_below)
        else:
            samples = await self.engine.sample(ids, sampling.n, sampling.temperature, SAMPLED_TOKENS)
            result = estimate_from_samples(samples, rubric.scale, self.low_confidence_below)
        return RubricScore(rubric.name, result, mode)

    async def score(
        self,
        items: list[JudgeInput | ItemFailure],
        selection: list[tuple[str, float]],
        mode: Mode = Mode.LOGPROBS,
        sampling: Sampling = Sampling(),
    ) -> list[ItemOutcome]:
        outcomes = [ItemOutcome() for _ in items]
        # (rubric, prompt ids) -> the (item, rubric position) slots waiting for it
        waiting: dict[tuple[str, tuple[int, ...]], list[tuple[int, int]]] = {}
        for index, item in enumerate(items):
            if isinstance(item, ItemFailure):
                outcomes[index].failure = item
                continue
            judged = self._without_score_claims(item, outcomes[index])
            for position, (name, _) in enumerate(selection):
                if name == SEMSCORE:
                    continue
                try:
                    ids = self._prompt(index, judged, self.rubrics[name])
                except ItemFailure as failure:
                    outcomes[index].failure = failure
                    break
                waiting.setdefault((name, tuple(ids)), []).append((index, position))

        keys = sorted(waiting, key=lambda key: key[1])  # shared prefixes side by side
        semscore_at = [p for p, (name, _) in enumerate(selection) if name == SEMSCORE]
        jobs = [self._score_one(list(ids), self.rubrics[name], mode, sampling) for name, ids in keys]
        if semscore_at:
            jobs.append(self._semscores(items, outcomes))
        results = await asyncio.gather(*jobs, return_exceptions=True)
        semscores = results.pop() if semscore_at else {}
        per_item: dict[int, dict[int, RubricScore]] = {}
        if isinstance(semscores, BaseException):
            log.error("SemScore failed", exc_info=semscores)
            for outcome in outcomes:
                outcome.failure = outcome.failure or ItemFailure("INTERNAL", f"rubric {SEMSCORE!r}: {semscores}")
            semscores = {}
        for index, score in semscores.items():
            per_item.setdefault(index, {})[semscore_at[0]] = score
        for key, result in zip(keys, results):
            for index, position in waiting[key]:
                if isinstance(result, BaseException):
                    outcomes[index].failure = outcomes[index].failure or _as_failure(result, key[0])
                else:
                    per_item.setdefault(index, {})[position] = result

        weights = [weight for _, weight in selection]
        for index, scores in per_item.items():
            outcome = outcomes[index]
            outcome.scores = [scores[p] for p in sorted(scores)]
            if outcome.failure is None:
                outcome.reward = weighted_reward([s.estimate.reward for s in outcome.scores], weights)
        return outcomes

    def _without_score_claims(self, item: JudgeInput, outcome: ItemOutcome) -> JudgeInput:
        """The item as the judge reads it; SemScore keeps the completion as written."""
        if self.redactor is None:
            return item
        completion, outcome.score_claims_removed = self.redactor.redact(item.completion)
        return dataclasses.replace(item, completion=completion) if outcome.score_claims_removed else item

    async def _semscores(self, items, outcomes: list[ItemOutcome]) -> dict[int, RubricScore]:
        """SemScore of every item still in the running, in one embedding batch off the event loop."""
        scored = [i for i, item in enumerate(items) if outcomes[i].failure is None]
        cosines = await asyncio.to_thread(
            self.semscorer.cosine, [items[i].completion for i in scored], [items[i].reference for i in scored]
        )
        return {i: RubricScore(SEMSCORE, semscore_estimate(c), Mode.EMBEDDING) for i, c in zip(scored, cosines)}


def semscore_estimate(cosine: float) -> ScoreEstimate:
    """A cosine as a score: no label distribution, all mass on the one value."""
    return ScoreEstimate(
        distribution={}, expected_score=cosine, reward=reward_from_cosine(cosine),
        label_mass=1.0, top_label="", low_confidence=False,
    )


def _as_failure(error: BaseException, rubric: str) -> ItemFailure:
    if isinstance(error, ItemFailure):
        return error
    if isinstance(error, NoLabelMass):
        return ItemFailure("INTERNAL", f"rubric {rubric!r}: {error}")
    log.error("engine request for rubric %s failed", rubric, exc_info=error)
    return ItemFailure("UNAVAILABLE", f"rubric {rubric!r}: the judge engine failed: {error}")
