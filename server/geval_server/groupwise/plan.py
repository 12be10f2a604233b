"""Which pairs of a group the judge compares (a schedule), or in which orders it lists the
whole group, in a way that does not depend on how the caller ordered the group.

Completions are put in a canonical order (by their text) before pairs are chosen, so a
group sent in another order is compared pair for pair the same way, and its rewards do
not move. Every pair is read in both orders (groupwise.py).
- all pairs: n(n-1)/2 pairs; identical completions get identical rewards.
- neighbours k: each completion against the next k in the canonical cyclic order, n*k
  pairs (fewer for small groups, which then are all pairs): linear in n, for large groups.
- anchor: each completion against one anchor text (the row's human reference, or a
  fixed text): "win rate against the reference", n pairs.
- listwise: the whole group in one prompt, read in the n cyclic shifts of the canonical
  order, so each completion stands once at every position: n reads.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

ALL_PAIRS_UP_TO = 8  # the default schedule: all pairs up to this group size, neighbours beyond
DEFAULT_NEIGHBOURS = 4


@dataclass(frozen=True)
class Group:
    """One prompt and its completions, as the judge reads them."""

    prompt: str
    completions: list[str]
    reference: str | None = None
    anchor: str | None = None  # the anchor schedule's text: the reference unless a fixed one is given


class Schedule(enum.Enum):
    ALL_PAIRS = "all_pairs"
    NEIGHBOURS = "neighbours"
    ANCHOR = "anchor"
    LISTWISE = "listwise"


def canonical_order(completions: Sequence[str]) -> list[int]:
    """Indices of the completions sorted by text (ties by index: identical texts read the same)."""
    return sorted(range(len(completions)), key=lambda i: (completions[i], i))


def _in_canonical_order(completions: Sequence[str], members: Sequence[int]) -> list[int]:
    kept = set(members)
    return [i for i in canonical_order(completions) if i in kept]


def default_schedule(size: int) -> Schedule:
    return Schedule.ALL_PAIRS if size <= ALL_PAIRS_UP_TO else Schedule.NEIGHBOURS


def pairs(completions: Sequence[str], members: Sequence[int], schedule: Schedule,
          neighbours: int = DEFAULT_NEIGHBOURS) -> list[tuple[int, int]]:
    """The pairs (i, j), i before j in the canonical order, among `members` (the indices
    that can be compared; failed members are left out). Not for the anchor schedule."""
    order = _in_canonical_order(completions, members)
    n = len(order)
    if schedule is Schedule.ALL_PAIRS or (schedule is Schedule.NEIGHBOURS and 2 * neighbours >= n - 1):
        return [(order[a], order[b]) for a in range(n) for b in range(a + 1, n)]
    if schedule is not Schedule.NEIGHBOURS:
        raise ValueError(f"no pairs within a group under {schedule}")
    chosen = {tuple(sorted((a, (a + d) % n))) for a in range(n) for d in range(1, neighbours + 1)}
    return [(order[a], order[b]) for a, b in sorted(chosen)]


def cyclic_shifts(completions: Sequence[str], members: Sequence[int]) -> list[list[int]]:
    """The listwise orders of `members`: the canonical order and its rotations, one per
    member, so each stands once at every position and a constant pull towards any
    position is spread evenly over the group."""
    order = _in_canonical_order(completions, members)
    return [order[shift:] + order[:shift] for shift in range(len(order))]
