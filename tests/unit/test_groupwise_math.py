"""Groupwise judging's pure parts: which pairs a schedule compares, and how both orders'
verdicts become one reward per completion (position bias cancelled, exact symmetry)."""

import itertools
import math
import random

import pytest
from geval_server.group_plan import Schedule, canonical_order, default_schedule, pairs
from geval_server.win_matrix import (
    Aggregation,
    OrderRead,
    PairVerdict,
    aggregate,
    anchor_outcome,
    bradley_terry_rewards,
)

TEXTS = ["delta", "alpha", "charlie", "bravo", "echo"]


def test_pairs_do_not_depend_on_the_request_order():
    for schedule, k in ((Schedule.ALL_PAIRS, 0), (Schedule.NEIGHBOURS, 1)):
        chosen = {frozenset((TEXTS[i], TEXTS[j])) for i, j in pairs(TEXTS, range(5), schedule, k)}
        shuffled = random.Random(3).sample(TEXTS, len(TEXTS))
        again = {frozenset((shuffled[i], shuffled[j])) for i, j in pairs(shuffled, range(5), schedule, k)}
        assert chosen == again


def test_all_pairs_and_neighbours_sizes():
    assert len(pairs(TEXTS, range(5), Schedule.ALL_PAIRS)) == 10
    assert len(pairs(TEXTS, range(5), Schedule.NEIGHBOURS, 1)) == 5  # a cycle: each against its next
    many = [f"t{i:02d}" for i in range(16)]
    chosen = pairs(many, range(16), Schedule.NEIGHBOURS, 4)
    assert len(chosen) == 16 * 4 and len(set(map(frozenset, chosen))) == len(chosen)
    assert len(pairs(TEXTS, range(5), Schedule.NEIGHBOURS, 2)) == 10  # covers every pair: all pairs


def test_failed_members_are_left_out_and_the_default_switches_at_eight():
    assert all(1 not in pair for pair in pairs(TEXTS, [0, 2, 3, 4], Schedule.ALL_PAIRS))
    assert default_schedule(8) is Schedule.ALL_PAIRS and default_schedule(9) is Schedule.NEIGHBOURS
    assert canonical_order(["b", "a", "a"]) == [1, 2, 0]


def _read(p):
    return OrderRead(p, 0.9)


def test_a_constant_position_bias_cancels():
    """A judge that adds b to whichever response is first gives the same P(i beats j)."""
    truth = 0.7
    for bias in (0.0, 0.1, 0.25):
        verdict = PairVerdict(_read(truth + bias), _read(1 - truth + bias))
        assert verdict.p_i_wins == pytest.approx(truth)
    always_first = PairVerdict(_read(0.9), _read(0.9))
    assert always_first.p_i_wins == pytest.approx(0.5) and not always_first.consistent
    assert PairVerdict(_read(0.8), _read(0.3)).consistent


def test_mean_win_probability_is_symmetric_and_sums_to_half_per_pair():
    rng = random.Random(0)
    verdicts = {(i, j): PairVerdict(_read(rng.random()), _read(rng.random()))
                for i, j in itertools.combinations(range(4), 2)}
    outcome = aggregate(4, verdicts, Aggregation.MEAN_WIN_PROBABILITY)
    for i, j in itertools.permutations(range(4), 2):
        assert outcome.win_matrix[i][j] + outcome.win_matrix[j][i] == pytest.approx(1.0, abs=1e-15)
    assert sum(outcome.rewards) == pytest.approx(2.0)  # all pairs: the mean reward is 1/2
    assert all(0.0 <= r <= 1.0 for r in outcome.rewards)
    assert 0.0 <= outcome.position_consistency <= 1.0 and 0.0 <= outcome.win_entropy <= 1.0


def test_bradley_terry_orders_like_the_wins_and_stays_finite_on_a_sweep():
    sweep = [[None, 1.0, 1.0], [0.0, None, 1.0], [0.0, 0.0, None]]
    rewards = bradley_terry_rewards(sweep)
    assert rewards[0] > rewards[1] > rewards[2] and all(math.isfinite(r) and 0 < r < 1 for r in rewards)
    even = [[None, 0.5], [0.5, None]]
    assert bradley_terry_rewards(even) == pytest.approx([0.5, 0.5])
    # an uncompared pair (0, 2) still gets a modelled probability through 1
    chain = [[None, 0.8, None], [0.2, None, 0.8], [None, 0.2, None]]
    r = bradley_terry_rewards(chain)
    assert r[0] > r[1] > r[2]


def test_a_group_of_one_and_the_anchor_schedule():
    alone = aggregate(1, {}, Aggregation.MEAN_WIN_PROBABILITY)
    assert alone.rewards == [0.5] and alone.position_consistency is None
    outcome = anchor_outcome(2, {0: PairVerdict(_read(0.8), _read(0.4))})
    assert outcome.rewards == pytest.approx([0.7, 0.5])
