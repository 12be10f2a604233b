"""Groupwise judging's pure parts: which pairs a schedule compares, in which orders a list
is read, and how the reads become one reward per completion (position bias cancelled,
exact symmetry)."""

import itertools
import math
import random

import pytest
from geval_server.groupwise.plan import Schedule, canonical_order, cyclic_shifts, default_schedule, pairs
from geval_server.groupwise.win_matrix import (
    Aggregation,
    ListRead,
    OrderRead,
    PairVerdict,
    aggregate,
    anchor_outcome,
    bradley_terry_rewards,
    listwise_outcome,
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


def test_cyclic_shifts_put_each_member_once_at_every_position_whatever_the_request_order():
    shifts = cyclic_shifts(TEXTS, [0, 2, 3, 4])  # member 1 failed: left out
    assert len(shifts) == 4 and all(sorted(order) == [0, 2, 3, 4] for order in shifts)
    for position in range(4):
        assert sorted(order[position] for order in shifts) == [0, 2, 3, 4]
    shuffled = random.Random(5).sample(TEXTS, len(TEXTS))
    as_texts = [[TEXTS[i] for i in order] for order in cyclic_shifts(TEXTS, range(5))]
    assert as_texts == [[shuffled[i] for i in order] for order in cyclic_shifts(shuffled, range(5))]


def _listwise_judge(texts, strength, bias):
    """What a judge with a strength per text and a multiplicative pull per position reads
    in every cyclic shift (mass 0.9 on the letters)."""
    reads = []
    for order in cyclic_shifts(texts, range(len(texts))):
        weights = [strength[texts[i]] * bias[k] for k, i in enumerate(order)]
        reads.append(ListRead(tuple(order), tuple(w / sum(weights) for w in weights), 0.9))
    return reads


def _peer_win(p, n):
    return (n - 1) * p / ((n - 2) * p + 1)


def test_a_list_reward_is_p_best_as_a_win_rate_against_an_average_peer():
    texts = ["a", "b", "c", "d"]
    flat = listwise_outcome(texts, _listwise_judge(texts, dict.fromkeys(texts, 1.0), [1.0] * 4))
    assert flat.rewards == pytest.approx([0.5] * 4, abs=1e-15)  # a judge that cannot choose: 0.5 each
    assert flat.win_entropy == pytest.approx(1.0) and flat.label_mass == pytest.approx(0.9)
    strength = {"a": 4.0, "b": 2.0, "c": 1.0, "d": 1.0}
    outcome = listwise_outcome(texts, _listwise_judge(texts, strength, [1.0] * 4))
    p_best = [strength[t] / 8.0 for t in texts]
    assert outcome.rewards == pytest.approx([_peer_win(p, 4) for p in p_best], abs=1e-12)
    assert outcome.rewards[0] > outcome.rewards[1] > outcome.rewards[2] == outcome.rewards[3]
    assert all(0.0 <= r <= 1.0 for r in outcome.rewards) and 0.0 < outcome.win_entropy < 1.0
    assert outcome.position_consistency == 1.0 and outcome.first_position_preference == 0.25
    assert all(cell is None for row in outcome.win_matrix for cell in row)


def test_a_pull_towards_one_position_moves_the_diagnostics_not_the_order():
    texts = ["a", "b", "c", "d"]
    strength = {"a": 4.0, "b": 2.0, "c": 1.0, "d": 1.0}
    biased = listwise_outcome(texts, _listwise_judge(texts, strength, [6.0, 1.0, 1.0, 1.0]))
    assert biased.rewards[0] > biased.rewards[1] > biased.rewards[2] == pytest.approx(biased.rewards[3])
    assert biased.first_position_preference == 1.0  # A always leads ...
    assert biased.position_consistency == 0.25  # ... so only the read with `a` at A names the winner: 1/n
    only_position = listwise_outcome(texts, _listwise_judge(texts, dict.fromkeys(texts, 1.0), [9.0, 1.0, 1.0, 1.0]))
    assert only_position.rewards == pytest.approx([0.5] * 4, abs=1e-15)  # spread evenly: nobody gains
    assert only_position.position_consistency == 1.0  # every member is a (tied) winner


def test_a_lean_added_to_each_position_cancels_exactly():
    """A judge that adds b[k] at the k-th letter (summing to 0) reads P(best) as without it."""
    texts, truth, lean = ["a", "b", "c"], {"a": 0.5, "b": 0.3, "c": 0.2}, [0.15, -0.05, -0.1]
    reads = [ListRead(tuple(order), tuple(truth[texts[i]] + lean[k] for k, i in enumerate(order)), 1.0)
             for order in cyclic_shifts(texts, range(3))]
    assert listwise_outcome(texts, reads).rewards == pytest.approx([_peer_win(truth[t], 3) for t in texts], abs=1e-12)


def test_a_list_of_two_gives_the_pair_reward():
    texts = ["a", "b"]
    for bias in (1.0, 3.0):
        reads = _listwise_judge(texts, {"a": 3.0, "b": 1.0}, [bias, 1.0])
        pair = PairVerdict(OrderRead(reads[0].p_letters[0], 0.9), OrderRead(reads[1].p_letters[0], 0.9))
        assert listwise_outcome(texts, reads).rewards == pytest.approx([pair.p_i_wins, 1 - pair.p_i_wins], abs=1e-15)


def test_identical_members_get_equal_rewards_and_the_request_order_changes_nothing():
    texts = ["same", "other", "same", "third", "fourth"]
    rng = random.Random(1)
    strength = {t: rng.uniform(0.5, 2.0) for t in texts}
    bias = [2.5, 1.0, 0.7, 1.2, 0.4]
    outcome = listwise_outcome(texts, _listwise_judge(texts, strength, bias))
    assert outcome.rewards[0] == outcome.rewards[2]  # pooled: exactly equal
    order = [3, 0, 4, 2, 1]
    moved = [texts[i] for i in order]
    again = listwise_outcome(moved, _listwise_judge(moved, strength, bias))
    for k, i in enumerate(order):
        assert again.rewards[k] == pytest.approx(outcome.rewards[i], abs=1e-12)
    everyone = ["same"] * 4
    alike = listwise_outcome(everyone, _listwise_judge(everyone, strength, bias))
    assert len(set(alike.rewards)) == 1 and alike.rewards[0] == pytest.approx(0.5)


def test_a_list_with_failed_members_or_nobody_to_compare():
    texts = ["a", "b", "c"]
    reads = [ListRead(order, (0.7, 0.3), 0.8) for order in ((0, 2), (2, 0))]  # member 1 failed: not listed
    outcome = listwise_outcome(texts, reads)
    assert outcome.rewards == pytest.approx([0.5, 0.5, 0.5])  # 0 and 2 each 0.5 from the pull to A
    assert outcome.first_position_preference == 1.0
    nobody = listwise_outcome(texts, [])
    assert nobody.rewards == [0.5] * 3 and nobody.position_consistency is None and nobody.label_mass is None


@pytest.mark.parametrize("aggregation", list(Aggregation))
def test_a_permuted_group_and_identical_texts_give_bit_identical_rewards(aggregation):
    """Members 0 and 2 are one text (their pair reads the same prompt both ways); the group
    permuted gives each member the same reward to the last bit (sums are correctly rounded)."""
    # values where plain left-to-right sums gave the two copies rewards an ulp apart
    tie, ab = OrderRead(0.8174032757237575, 0.9), OrderRead(0.7473502359026275, 0.95)
    ba = OrderRead(0.9180299402056066, 0.97)
    verdicts = {(1, 0): PairVerdict(ba, ab), (1, 2): PairVerdict(ba, ab), (0, 2): PairVerdict(tie, tie)}
    outcome = aggregate(3, verdicts, aggregation)
    assert outcome.win_matrix[0][2] == 0.5 and outcome.rewards[0] == outcome.rewards[2]
    order = [2, 0, 1]  # member order[k] stands at k
    where = {member: k for k, member in enumerate(order)}
    moved = {(where[i], where[j]): verdict for (i, j), verdict in verdicts.items()}
    permuted = aggregate(3, moved, aggregation)
    assert [permuted.rewards[where[i]] for i in range(3)] == outcome.rewards
