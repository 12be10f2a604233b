"""Scores a batch of items with the chosen scorers: one request per (item,
scorer), identical requests scored once, every scorer's requests in flight
together so vLLM batches them, then one reward per item.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from .engine import JudgeEngine
from .prompts import JudgeInput
from .score_claims import ScoreClaimRedactor
from .scorers.base import ItemFailure, Score, ScoreOptions, Scorer
from .scoring import NoLabelMass, weighted_reward

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ItemScore:
    scorer: Scorer
    score: Score


@dataclass
class ItemOutcome:
    reward: float = 0.0
    scores: list[ItemScore] = field(default_factory=list)
    failure: ItemFailure | None = None
    score_claims_removed: int = 0


class Judge:
    def __init__(
        self,
        engine: JudgeEngine,
        scorers: Mapping[str, Scorer],
        judge_model: str,
        redactor: ScoreClaimRedactor | None = None,
    ) -> None:
        """redactor: blanks score claims in completions for the scorers that want it; None keeps them."""
        self.engine = engine
        self.scorers = dict(scorers)
        self.judge_model = judge_model
        self.redactor = redactor

    @property
    def needs_reference(self) -> dict[str, bool]:
        """Every scorer served, and whether it needs the item's reference."""
        return {name: scorer.needs_reference for name, scorer in self.scorers.items()}

    async def score(
        self,
        items: Sequence[JudgeInput | ItemFailure],
        selection: Sequence[tuple[str, float]],
        options: ScoreOptions = ScoreOptions(),
    ) -> list[ItemOutcome]:
        outcomes = [ItemOutcome() for _ in items]
        scorers = [self.scorers[name] for name, _ in selection]
        # (scorer position, request) -> the (item, scorer position) slots waiting for it
        waiting: dict[tuple[int, Hashable], list[tuple[int, int]]] = {}
        for index, item in enumerate(items):
            if isinstance(item, ItemFailure):
                outcomes[index].failure = item
                continue
            blanked = self._without_score_claims(item, outcomes[index])
            try:
                wanted = [s.request(blanked if s.blank_score_claims else item, f"items[{index}]") for s in scorers]
            except ItemFailure as failure:
                outcomes[index].failure = failure
                continue
            for position, request in enumerate(wanted):
                waiting.setdefault((position, request), []).append((index, position))

        positions = sorted({position for position, _ in waiting})
        requests = {p: [request for q, request in waiting if q == p] for p in positions}
        results = await asyncio.gather(
            *(scorers[p].score(requests[p], options) for p in positions), return_exceptions=True
        )
        by_key: dict[tuple[int, Hashable], Score | BaseException] = {}
        for p, batch in zip(positions, results):
            scored = [batch] * len(requests[p]) if isinstance(batch, BaseException) else batch
            by_key.update(zip(((p, request) for request in requests[p]), scored))

        per_item: dict[int, dict[int, ItemScore]] = {}
        for key, result in by_key.items():
            for index, position in waiting[key]:
                if isinstance(result, BaseException):
                    failure = self._as_failure(result, scorers[position].name)
                    outcomes[index].failure = outcomes[index].failure or failure
                else:
                    per_item.setdefault(index, {})[position] = ItemScore(scorers[position], result)
        weights = [weight for _, weight in selection]
        for index, scores in per_item.items():
            outcome = outcomes[index]
            outcome.scores = [scores[p] for p in sorted(scores)]
            if outcome.failure is None:
                outcome.reward = weighted_reward([s.score.estimate.reward for s in outcome.scores], weights)
        return outcomes

    def _without_score_claims(self, item: JudgeInput, outcome: ItemOutcome) -> JudgeInput:
        """The item with score claims blanked in its completion, counted on the outcome."""
        if self.redactor is None:
            return item
        completion, outcome.score_claims_removed = self.redactor.redact(item.completion)
        return dataclasses.replace(item, completion=completion) if outcome.score_claims_removed else item

    def _as_failure(self, error: BaseException, scorer: str) -> ItemFailure:
        """A failed request as its items' error: UNAVAILABLE (retry later) when the engine is
        down, INTERNAL for anything else, logged."""
        if isinstance(error, ItemFailure):
            return error
        if isinstance(error, NoLabelMass):
            return ItemFailure("INTERNAL", f"rubric {scorer!r}: {error}")
        if not self.engine.is_running:
            return ItemFailure("UNAVAILABLE", f"rubric {scorer!r}: the judge engine is down: {error}")
        log.error("scoring with %s failed", scorer, exc_info=error)
        return ItemFailure("INTERNAL", f"rubric {scorer!r}: scoring failed: {type(error).__name__}: {error}")


