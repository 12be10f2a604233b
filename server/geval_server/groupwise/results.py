"""What comparing a group answers, whichever kind compared it: per member its reward and
failure, per rubric the outcome behind them, and the one way rubrics combine into a
member's reward."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from geval_server.groupwise.plan import Schedule
from geval_server.groupwise.win_matrix import GroupOutcome
from geval_server.scorers.base import ItemFailure
from geval_server.scorers.scoring_mode import Logprobs, ScoringMode

ANCHOR = -1  # the anchor's place in a rationale's listing


@dataclass(frozen=True)
class Rationale:
    """What the judge wrote before one verdict: the members as the prompt listed them
    (representatives; ANCHOR for the anchor), Response A first."""

    listed: tuple[int, ...]
    text: str


@dataclass
class RubricGroupResult:
    rubric: str
    content_hash: str
    outcome: GroupOutcome
    rationales: list[Rationale] = field(default_factory=list)  # reasoning mode: one per prompt read


@dataclass
class GroupResult:
    rewards: list[float] = field(default_factory=list)
    member_failures: list[ItemFailure | None] = field(default_factory=list)
    per_rubric: list[RubricGroupResult] = field(default_factory=list)
    schedule: Schedule | None = None
    failure: ItemFailure | None = None
    score_claims_removed: list[int] = field(default_factory=list)
    # nothing was read: fewer than two distinct completions could be compared (a group of
    # one, copies of one text, or every other member failed), so every reward is 0.5
    alone: bool = False
    # what judging it read, over all rubrics: one read per prompt, whatever else in the
    # call needed the same prompt (a read that two groups share counts for each)
    engine_reads: int = 0
    prompt_tokens: int = 0
    # the judge's generated tokens (rationales; samples); in a dry run, the most the mode allows
    generated_tokens: int = 0
    mode: ScoringMode = Logprobs()
    # with a gate (judge/gate.py): per member whether it failed the gate, and the gate's score on it
    gated: list[bool] = field(default_factory=list)
    gate_scores: list = field(default_factory=list)



def combine(result: GroupResult, weights: Sequence[float]) -> None:
    """Each member's reward: the weighted mean over rubrics of its group reward (the judge's
    comparisons and the reward models' alike; a failed member gets 0.0)."""
    total = sum(weights)
    size = len(result.member_failures)
    result.rewards = [
        0.0 if result.member_failures[i] is not None
        else sum(w * r.outcome.rewards[i] for w, r in zip(weights, result.per_rubric)) / total
        for i in range(size)
    ]
