"""Step 3, the bound: where the defences read a completion twice, each slot reader keeps the
lower of its two rewards, so a claim can only lower it. (Group members are bounded by their
comparer: scorers/geval/groups/comparer.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from geval_server.judge.outcomes import ItemScore
from geval_server.judge.reads import Read
from geval_server.scorers.base import Score


@dataclass(frozen=True)
class BoundScores:
    """An item's scores per selection position (those read without failure), in order."""

    kept: list[ItemScore]  # the lower of the two reads where there were two
    plain: list[ItemScore]  # the first reads alone
    lowered: bool  # a second read was lower and was kept
    gaps: dict[str, float]  # per slot reader: plain - kept reward (>= 0)


def bound(reads: Sequence[tuple[Read, Score]]) -> BoundScores:
    plain = {read.position: ItemScore(read.scorer, score) for read, score in reads if not read.second}
    kept = dict(plain)
    lowered = False
    for read, score in reads:
        if read.second and read.position in kept and score.reward < kept[read.position].score.reward:
            kept[read.position] = ItemScore(read.scorer, score)
            lowered = True
    gaps = {s.scorer.name: s.score.reward - kept[p].score.reward for p, s in plain.items() if s.scorer.reads_score_slot}
    return BoundScores([kept[p] for p in sorted(kept)], [plain[p] for p in sorted(plain)], lowered, gaps)
