"""Audit statistics on small synthetic data with known answers."""

import math

import numpy as np
import pytest
from geval_audit.checks import length_bias, self_preference
from geval_audit.stats import bootstrap_mean, dataset_correlation, group_spearmans, grouped_correlation


def test_bootstrap_interval_contains_the_true_gap():
    rng = np.random.default_rng(1)
    gaps = 0.1 + rng.normal(0.0, 0.05, size=400)
    estimate = bootstrap_mean(gaps)
    assert estimate.low < 0.1 < estimate.high
    assert estimate.excludes(0.0) == "above"
    assert estimate.n == 400


def test_bootstrap_interval_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(11)
    samples = [0.25 + rng.normal(0.0, 1.0, size=200) for _ in range(60)]
    covered = sum(
        (e := bootstrap_mean(s, resamples=1000, seed=i)).low < 0.25 < e.high for i, s in enumerate(samples)
    )
    assert covered >= 51  # 95% of 60 is 57; 51 leaves room for chance


def test_cluster_bootstrap_counts_repeated_ratings_of_one_pair_once():
    pairs = [0.3, -0.1, 0.2, 0.05, 0.4, -0.2, 0.1, 0.0]
    repeated = [g for g in pairs for _ in range(6)]  # six raters judged each pair
    naive = bootstrap_mean(repeated)
    clustered = bootstrap_mean(repeated, clusters=[i for i in range(len(pairs)) for _ in range(6)])
    once = bootstrap_mean(pairs)  # same seed: the same clusters drawn
    assert (clustered.low, clustered.high) == pytest.approx((once.low, once.high))
    assert clustered.value == pytest.approx(naive.value)
    assert clustered.high - clustered.low > 2 * (naive.high - naive.low)


def test_per_prompt_correlation_has_known_values_and_skips_constant_groups():
    groups = {
        "a": ([1, 2, 3, 4], [1, 3, 2, 4]),  # Spearman 0.8, Kendall 4/6
        "b": ([1, 2, 3], [3, 2, 1]),  # -1, -1
        "constant metric": ([2, 2, 2], [1, 2, 3]),
        "constant human": ([1, 2], [5, 5]),
        "one completion": ([1], [2]),
    }
    labels = [name for name, (metric, _) in groups.items() for _ in metric]
    metric = [x for xs, _ in groups.values() for x in xs]
    human = [y for _, ys in groups.values() for y in ys]
    result = grouped_correlation(metric, human, labels)
    assert result.groups_used == 2
    assert result.groups_skipped == 3
    assert result.spearman.value == pytest.approx((0.8 - 1.0) / 2)
    assert result.kendall.value == pytest.approx((4 / 6 - 1.0) / 2)
    assert result.spearman.low <= result.spearman.value <= result.spearman.high


def test_dataset_correlation_of_a_monotone_relation_is_one():
    x = list(range(10))
    result = dataset_correlation(x, [v**3 for v in x])
    assert result.spearman.value == pytest.approx(1.0)
    assert result.kendall.value == pytest.approx(1.0)
    assert result.spearman.low == pytest.approx(1.0)


def test_dataset_correlation_is_undefined_for_a_constant_side():
    result = dataset_correlation([1, 2, 3, 4], [2, 2, 2, 2])
    assert np.isnan(result.spearman.value)
    assert result.spearman.text() == "n/a"


def _pair(gap, preference, group="g", completion_words=10, reference_words=10):
    reference = 0.5
    return {
        "key": f"{group}-{gap}-{preference}", "group": group, "preference": preference,
        "completion_words": completion_words, "reference_words": reference_words,
        "completion_result": {"reward": reference + gap, "scores": [{"rubric": "r", "reward": reference + gap}]},
        "reference_result": {"reward": reference, "scores": [{"rubric": "r", "reward": reference}]},
    }


def test_self_preference_breakdown_and_rate():
    records = (
        [_pair(0.2, "reference"), _pair(0.1, "reference"), _pair(0.3, "reference"), _pair(-0.1, "reference")]
        + [_pair(0.2, "completion"), _pair(0.4, "completion")]
        + [_pair(-0.2, "equal")]
    )
    check = self_preference(records)
    assert check.pairs == 7
    assert check.gap.value == pytest.approx(0.9 / 7)
    assert check.judge_prefers_completion.value == pytest.approx(5 / 7)
    assert check.judge_prefers_reference == pytest.approx(2 / 7)
    assert check.by_human_label["reference"].pairs == 4
    assert check.self_preference_rate.value == pytest.approx(3 / 4)
    assert check.by_human_label["equal"].judge_prefers_completion.value == 0.0
    assert check.gap_by_rubric["r"].value == pytest.approx(check.gap.value)


def test_self_preference_is_detected_only_when_the_interval_clears_the_margin():
    biased = [_pair(0.1 + 0.01 * i, "reference") for i in range(30)]
    assert self_preference(biased).detected
    assert not self_preference(biased, margin=0.5).detected
    mixed = [_pair(g, "reference") for g in (0.2, -0.2, 0.1, -0.1, 0.05, -0.05)]
    assert not self_preference(mixed).detected


def test_a_gap_that_is_only_length_is_called_length_and_a_real_one_holds_at_equal_length():
    # The judge adds 0.002 reward per word of difference (and some noise); the model texts run longer.
    noise = [0.01, -0.01, 0.004, -0.004, 0.0]
    by_length = [_pair(0.002 * d + noise[i % 5], "reference", group=f"p{i}", completion_words=10 + d)
                 for i, d in enumerate(range(5, 65, 2))]
    check = self_preference(by_length, resamples=500)
    assert check.detected  # the raw verdict
    length = check.length
    assert length.gap_at_equal_length.low < 0 < length.gap_at_equal_length.high
    assert length.gap_per_100_words.value == pytest.approx(0.2, abs=0.02)
    assert not length.detected and "length explains it" in length.verdict
    # The same lengths, but a constant preference of 0.1: it holds at equal length.
    real = [_pair(0.1, "reference", group=f"p{i}", completion_words=10 + d) for i, d in enumerate(range(5, 65, 2))]
    held = self_preference(real, resamples=500).length
    assert held.detected and held.gap_at_equal_length.value == pytest.approx(0.1)
    assert "holds at equal length" in held.verdict


def test_length_control_is_left_out_when_lengths_are_unknown_or_all_alike():
    alike = [_pair(0.1 + 0.01 * i, "reference", group=f"p{i}") for i in range(10)]  # all 10 vs 10 words
    assert self_preference(alike).length is None


def _scored(group, words, reward):
    return {"key": f"{group}-{words}", "group": group, "completion_words": words, "completion_digest": f"{words}",
            "completion_result": {"reward": reward}}


def test_length_bias_within_prompts_differs_from_overall():
    # Within each prompt longer means higher reward; across prompts the long ones score low.
    records = [_scored("short prompt", w, 0.6 + 0.01 * w) for w in (5, 10, 15)]
    records += [_scored("long prompt", w, 0.1 + 0.001 * w) for w in (100, 110, 120)]
    bias = length_bias(records)
    assert bias.within_prompts.spearman.value == pytest.approx(1.0)
    assert bias.within_prompts.groups_used == 2
    assert bias.overall.spearman.value < 0


def test_group_spearmans_per_group_skipping_constant_and_nan():
    metric = [1.0, 2.0, 3.0, 3.0, 2.0, 1.0, 5.0, 5.0, math.nan, 1.0, 2.0]
    human = [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0, 4.0]
    groups = ["a", "a", "a", "b", "b", "b", "c", "c", "c", "d", "d"]
    found = group_spearmans(metric, human, groups)
    assert found == {"a": pytest.approx(1.0), "b": pytest.approx(-1.0)}  # c: constant metric once NaN left out
