"""Which pairs of a group the judge compares (a schedule), or in which orders it lists the
whole group, in a way that does not depend on how the caller ordered the group.

Completions are put in a canonical order (by their text) before pairs are chosen, so a
group sent in another order is compared pair for pair the same way, and its rewards do
not move. Every pair is read in both orders (judge.py).

The pair schedules and anchor choose among the group's distinct texts (`distinct`): copies
of one text are judged once, through their representative, and every copy takes its
reward. Otherwise a schedule that does not compare everyone with everyone (neighbours)
gives copies different opponents, and so different rewards.
- all pairs: d(d-1)/2 pairs for d distinct completions.
- neighbours k: each completion against the next k in the canonical cyclic order, d*k
  pairs (fewer for small groups, which then are all pairs): linear in d, for large groups.
- anchor: each completion against one anchor text (the row's human reference, or a
  fixed text): "win rate against the reference", d pairs.
- listwise: the whole group (its distinct texts) in one prompt, read in the d cyclic
  shifts of the canonical order, so each completion stands once at every position: d reads.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from geval_server.scorers.base import StepOptions

ALL_PAIRS_UP_TO = 8  # the default schedule: all pairs up to this group size, neighbours beyond
DEFAULT_NEIGHBOURS = 4


@dataclass(frozen=True)
class Group:
    """One prompt and its completions, as the judge reads them."""

    prompt: str
    completions: list[str]
    reference: str | None = None
    anchor: str | None = None  # the anchor schedule's text: the reference unless a fixed one is given
    chat: tuple[tuple[str, str], ...] | None = None  # a chat prompt's messages (the reward model reads them)
    steps: StepOptions | None = None  # how process rewards split and reduce each completion (the request's)


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


def distinct(completions: Sequence[str], members: Sequence[int]) -> dict[int, tuple[int, ...]]:
    """The distinct texts among `members`: each text's representative (its first member in
    the canonical order, the lowest index) and all the members holding that text."""
    copies: dict[str, list[int]] = {}
    for i in _in_canonical_order(completions, members):
        copies.setdefault(completions[i], []).append(i)
    return {same[0]: tuple(same) for same in copies.values()}


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


@dataclass(frozen=True)
class Cost:
    """What one rubric's judging of a group of `distinct` texts reads."""

    pairs: int  # pairs compared (anchor: completions against the anchor; listwise: 0)
    reads: int  # prompts read: both orders of each pair, or one list per cyclic shift


def cost(schedule: Schedule | None, distinct_texts: int, neighbours: int = DEFAULT_NEIGHBOURS) -> Cost:
    """The reads a schedule makes for one rubric and a group of `distinct_texts` distinct
    completions that can all be compared, before any read (a dry run). None as the
    schedule is the default for that size. Several rubrics read this each; a group of one
    (or of copies of one text) reads nothing, except against an anchor. Reads that two
    groups of one call share are made once, and count for each."""
    d = distinct_texts
    schedule = schedule or default_schedule(d)
    if schedule is Schedule.ANCHOR:
        return Cost(d, 2 * d)
    if schedule is Schedule.LISTWISE:
        return Cost(0, d if d >= 2 else 0)
    if schedule is Schedule.NEIGHBOURS and 2 * neighbours < d - 1:
        return Cost(d * neighbours, 2 * d * neighbours)
    return Cost(d * (d - 1) // 2, d * (d - 1))
