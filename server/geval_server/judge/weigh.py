"""Step 4, weigh: the item's outcome, its reward the weighted mean of the scores the bound kept."""

from __future__ import annotations

from geval_server.judge.bound import BoundScores
from geval_server.judge.outcomes import ItemOutcome, weighted_reward
from geval_server.judge.reads import ItemPlan
from geval_server.scorers.base import ItemFailure


def weigh(plan: ItemPlan, scores: BoundScores, failure: ItemFailure | None) -> ItemOutcome:
    """failure: the item's first failed read, if any; an item that failed has no reward."""
    outcome = ItemOutcome(scores=scores.kept, failure=plan.failure or failure,
                          score_claims_removed=plan.score_claims_removed, masked_read_lowered=scores.lowered,
                          read_twice=plan.read_twice, bound_gaps=scores.gaps)
    if outcome.failure is None:
        weights = [weight for _, weight in plan.selection]
        outcome.reward = weighted_reward([s.score.reward for s in scores.kept], weights)
        # without a lowered read the plain reads are the kept ones
        outcome.plain_reward = (weighted_reward([s.score.reward for s in scores.plain], weights)
                                if scores.lowered else outcome.reward)
    return outcome
