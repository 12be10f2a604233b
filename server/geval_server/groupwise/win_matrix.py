"""From the judge's verdict probabilities to one reward per completion of a group.

A pair (i, j) is read in both orders. With i placed first the judge gives P(A) for i;
with j placed first, P(B) for i. P(i beats j) is their mean: a judge that leans to the
first place by b adds b to one read and takes it from the other, so the lean cancels,
and P(j beats i) = 1 - P(i beats j) exactly. Rewards, in [0, 1]:
- mean win probability: the mean of P(i beats j) over the j it was compared with;
- Bradley-Terry: strengths fitted to the soft outcomes (Hunter's MM algorithm, with one
  pseudo-comparison against an average opponent so a clean sweep stays finite), then the
  mean over the group of the model's P(i beats j), so uncompared pairs count too.
A completion compared with nobody (a group of one, or every other member failed) gets 0.5.
Copies of one text are compared through one representative (plan.distinct): each copy
takes its place in the win matrix, copies tie at 0.5 with each other, and the diagnostics
count each read once.

A list (the whole group in one prompt) is read once per cyclic shift, each member once at
every position. P(best = i) is the mean over the shifts of the probability of the letter
where i stands, so a pull towards a position is shared evenly. The reward is the chance
that i beats a peer of the others' mean strength under Luce's choice axiom (strengths
proportional to P(best)): (n-1)p / ((n-2)p + 1). It is 0.5 for a judge that cannot choose
(p = 1/n), P(i beats j) itself for n = 2 (the pair reward), and it is monotone in p
without clipping, so the top of the group keeps its differences and the scale is the
pairs'. Identical texts are listed once (judge.py); listed at several places, their
P(best) would be pooled.
"""

from __future__ import annotations

import enum
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NEUTRAL = 0.5
BT_ITERATIONS = 200
BT_TOLERANCE = 1e-10


class Aggregation(enum.Enum):
    MEAN_WIN_PROBABILITY = "mean_win_probability"
    BRADLEY_TERRY = "bradley_terry"


@dataclass(frozen=True)
class OrderRead:
    """One order of a pair: P(A) renormalized over the two verdicts, and the mass the
    judge put on them before renormalizing."""

    p_first: float
    mass: float


@dataclass(frozen=True)
class PairVerdict:
    """Both orders of (i, j): `forward` with i first, `backward` with j first."""

    forward: OrderRead
    backward: OrderRead

    @property
    def p_i_wins(self) -> float:
        # As 1 + (f - b), not f + (1 - b): two identical texts (f == b) tie at exactly 0.5.
        return (1.0 + (self.forward.p_first - self.backward.p_first)) / 2

    @property
    def consistent(self) -> bool:
        """Both orders prefer the same completion (or both are undecided)."""
        return _side(self.forward.p_first) == -_side(self.backward.p_first)


def _side(p_first: float) -> int:
    return (p_first > NEUTRAL) - (p_first < NEUTRAL)


@dataclass(frozen=True)
class GroupOutcome:
    rewards: list[float]
    win_matrix: list[list[float | None]]  # [i][j] = P(i beats j); None where not compared
    position_consistency: float | None  # share of pairs whose two orders agree; None: no pair
    first_position_preference: float | None  # share of reads preferring the first-placed response
    label_mass: float | None  # mean mass on the two verdicts
    win_entropy: float | None  # mean binary entropy (bits) of P(i beats j): 1 is a coin toss


def aggregate(size: int, verdicts: Mapping[tuple[int, int], PairVerdict], aggregation: Aggregation,
              copies: Mapping[int, Sequence[int]] | None = None) -> GroupOutcome:
    """verdicts: per compared pair (i, j), both orders' reads. copies: per representative
    in the verdicts, every member holding its text (the representative included); None:
    every member is its own. A copy takes its representative's place in each of its pairs,
    and copies of one text tie at exactly 0.5 (what the read of a text against itself
    gives), so copies get identical rewards. The diagnostics count each read once."""
    matrix: list[list[float | None]] = [[None] * size for _ in range(size)]
    copies = copies or {}
    for (i, j), verdict in verdicts.items():
        for a in copies.get(i, (i,)):
            for b in copies.get(j, (j,)):
                matrix[a][b], matrix[b][a] = verdict.p_i_wins, 1.0 - verdict.p_i_wins
    for same in copies.values():
        for a in same:
            for b in same:
                if a != b:
                    matrix[a][b] = NEUTRAL
    if aggregation is Aggregation.BRADLEY_TERRY:
        rewards = bradley_terry_rewards(matrix)
    else:
        rewards = [_mean([p for p in row if p is not None], NEUTRAL) for row in matrix]
    return GroupOutcome(rewards, matrix, *_pair_diagnostics(verdicts))


def _pair_diagnostics(verdicts: Mapping[object, PairVerdict]) -> tuple[float | None, ...]:
    """Position consistency, first-position preference, label mass and win entropy of the
    pairs read."""
    reads = [read for v in verdicts.values() for read in (v.forward, v.backward)]
    return (_mean([v.consistent for v in verdicts.values()]), _mean([read.p_first > NEUTRAL for read in reads]),
            _mean([read.mass for read in reads]), _mean([_entropy(v.p_i_wins) for v in verdicts.values()]))


def bradley_terry_rewards(matrix: Sequence[Sequence[float | None]]) -> list[float]:
    """Each member's mean modelled P(beats j) over the other members."""
    n = len(matrix)
    if n < 2:
        return [NEUTRAL] * n
    strength = [1.0] * n
    for _ in range(BT_ITERATIONS):
        updated = []
        for i in range(n):
            # one pseudo-comparison, half won, against an opponent of strength 1
            compared = [j for j in range(n) if matrix[i][j] is not None]
            wins = math.fsum([NEUTRAL, *(matrix[i][j] for j in compared)])
            weight = math.fsum([1.0 / (strength[i] + 1.0), *(1.0 / (strength[i] + strength[j]) for j in compared)])
            updated.append(wins / weight)
        scale = math.exp(math.fsum(math.log(s) for s in updated) / n)  # geometric mean 1
        updated = [s / scale for s in updated]
        change = max(abs(math.log(a / b)) for a, b in zip(updated, strength))
        strength = updated
        if change < BT_TOLERANCE:
            break
    return [_mean([strength[i] / (strength[i] + strength[j]) for j in range(n) if j != i]) for i in range(n)]


def anchor_outcome(size: int, verdicts: Mapping[int, PairVerdict],
                   copies: Mapping[int, Sequence[int]] | None = None) -> GroupOutcome:
    """Each member against one anchor text: its reward is P(member beats the anchor).
    copies: as in `aggregate`; a copy takes its representative's verdict."""
    copies = copies or {}
    wins = {a: verdict.p_i_wins for i, verdict in verdicts.items() for a in copies.get(i, (i,))}
    return GroupOutcome([wins.get(i, NEUTRAL) for i in range(size)], [[None] * size for _ in range(size)],
                        *_pair_diagnostics(verdicts))


@dataclass(frozen=True)
class ListRead:
    """One listing of a group: the members in the order listed (members[k] stands at the
    k-th letter), each letter's probability renormalized over the listed letters, and the
    mass the judge put on them before renormalizing."""

    members: tuple[int, ...]
    p_letters: tuple[float, ...]
    mass: float


def listwise_outcome(texts: Sequence[str], reads: Sequence[ListRead],
                     copies: Mapping[int, Sequence[int]] | None = None) -> GroupOutcome:
    """texts: the group's completions as judged; reads: one per cyclic shift of the listed
    members (none: nobody was listed, every reward 0.5). copies: as in `aggregate`; a copy
    of a listed member takes its reward."""
    size = len(texts)
    if not reads:
        return GroupOutcome([NEUTRAL] * size, [[None] * size for _ in range(size)], None, None, None, None)
    at: dict[int, list[float]] = defaultdict(list)
    for read in reads:
        for member, p in zip(read.members, read.p_letters):
            at[member].append(p)
    # fsum is correctly rounded: the same values in any order give the same P(best)
    own = {i: math.fsum(ps) / len(reads) for i, ps in at.items()}
    alike: dict[str, list[float]] = defaultdict(list)
    for i, p in own.items():
        alike[texts[i]].append(p)
    best = {i: math.fsum(alike[texts[i]]) / len(alike[texts[i]]) for i in own}
    n = len(best)
    top = max(best.values())
    winners = {i for i, p in best.items() if p == top}
    rewards = {a: _peer_win(p, n) for i, p in best.items() for a in (copies or {}).get(i, (i,))}
    return GroupOutcome(
        rewards=[rewards.get(i, NEUTRAL) for i in range(size)],
        win_matrix=[[None] * size for _ in range(size)],
        position_consistency=_mean([bool(_leaders(read) & winners) for read in reads]),
        first_position_preference=_mean([read.p_letters[0] > max(read.p_letters[1:]) for read in reads]),
        label_mass=_mean([read.mass for read in reads]),
        win_entropy=min(1.0, -sum(p * math.log2(p) for p in best.values() if p > 0.0) / math.log2(n)),
    )


def _peer_win(p_best: float, n: int) -> float:
    """P(i beats a peer of the others' mean strength), strengths proportional to P(best)."""
    return min(1.0, (n - 1) * p_best / ((n - 2) * p_best + 1.0))


def _leaders(read: ListRead) -> set[int]:
    """The members at the read's most probable letter (several only on an exact tie)."""
    top = max(read.p_letters)
    return {member for member, p in zip(read.members, read.p_letters) if p == top}


def _entropy(p: float) -> float:
    return -sum(q * math.log2(q) for q in (p, 1.0 - p) if q > 0.0)


def _mean(values: Sequence[float], empty: float | None = None) -> float | None:
    """fsum is correctly rounded: the same values in any order (a reordered group) give the
    same mean, bit for bit."""
    return math.fsum(values) / len(values) if values else empty
