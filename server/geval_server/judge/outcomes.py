"""What the judge answers per item, how the item's reward weighs its rubrics, and what the
bound did to each rubric over a call."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from geval_server.scorers.base import ItemFailure, Score, Scorer


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
    masked_read_lowered: bool = False  # the read with numerals masked was lower and set the reward
    plain_reward: float = 0.0  # the reward before the masked read bounded it
    read_twice: bool = False  # the bound changed the completion, so its slot readers read it twice
    # per scorer that reads a slot: what the bound took off its reward (plain - kept, >= 0)
    bound_gaps: dict[str, float] = field(default_factory=dict)
    gate: ItemScore | None = None  # the request's gate as checked on this item
    gated: bool = False  # it failed the gate: its reward is the gate_reward and nothing else read it


def weighted_reward(rewards: Sequence[float], weights: Sequence[float]) -> float:
    """The item's reward: the weighted mean of its scorers' rewards."""
    return sum(r * w for r, w in zip(rewards, weights)) / sum(weights)


@dataclass(frozen=True)
class BoundSummary:
    """What the bound did to one rubric over a call's items: a policy that learns to sway
    the judge's slot shows as a rising lowered share and gap."""

    rubric: str
    items: int  # items the rubric scored
    read_twice: int  # of them, read a second time (the bound changed the completion)
    lowered: int  # of them, whose reward the bounded read lowered
    gap_sum: float  # sum over them of plain - bounded reward

    @property
    def lowered_share(self) -> float:
        return self.lowered / self.items

    @property
    def mean_gap(self) -> float:
        return self.gap_sum / self.items


def bound_summaries(outcomes: Iterable[ItemOutcome]) -> list[BoundSummary]:
    """Per rubric read at a slot, in first-seen order, over the items scored without failure."""
    counts: dict[str, list] = {}
    for outcome in outcomes:
        if outcome.failure is not None:
            continue
        for rubric, gap in outcome.bound_gaps.items():
            count = counts.setdefault(rubric, [0, 0, 0, 0.0])
            count[0] += 1
            count[1] += outcome.read_twice
            count[2] += gap > 0
            count[3] += gap
    return [BoundSummary(rubric, *count) for rubric, count in counts.items()]
