"""The expectation math: label probabilities -> E[s] -> reward."""

import math

import pytest
from geval_server.judge.outcomes import weighted_reward
from geval_server.scorers.geval.expected_score import (
    NoLabelMass,
    Scale,
    estimate,
    estimate_from_samples,
    parse_sampled_label,
)
from geval_server.scorers.geval.slot import plan_label_reads

ONE_TO_FIVE = Scale(1, 5)


def test_expectation_renormalizes_over_labels():
    # 0.08 of the mass sits on tokens that are not labels.
    result = estimate({"3": 0.42, "4": 0.40, "5": 0.10}, ONE_TO_FIVE, low_confidence_below=0.5)
    assert result.expected_score == pytest.approx(3.652, abs=1e-3)
    assert round(result.expected_score, 2) == 3.65
    assert result.label_mass == pytest.approx(0.92)
    assert sum(result.distribution.values()) == pytest.approx(1.0)
    assert result.top_label == "3"
    assert not result.low_confidence


def test_second_known_expectation():
    result = estimate({"3": 0.10, "4": 0.55, "5": 0.25}, ONE_TO_FIVE, low_confidence_below=0.5)
    assert round(result.expected_score, 2) == 4.17
    assert result.reward == pytest.approx((result.expected_score - 1) / 4)


def test_even_split_is_the_midpoint_not_an_argmax():
    result = estimate({"3": 0.5, "4": 0.5}, ONE_TO_FIVE, low_confidence_below=0.0)
    assert result.expected_score == pytest.approx(3.5)
    assert result.reward == pytest.approx(0.625)


def test_reversed_scale_mirrors_the_reward():
    lower_is_better = Scale(1, 5, higher_is_better=False)
    probs = {"1": 0.1, "2": 0.6, "5": 0.3}
    forward = estimate(probs, ONE_TO_FIVE, 0.5)
    reversed_ = estimate(probs, lower_is_better, 0.5)
    assert reversed_.expected_score == pytest.approx(forward.expected_score)
    assert reversed_.reward == pytest.approx(1.0 - forward.reward)


def test_low_label_mass_is_flagged():
    result = estimate({"1": 0.05, "2": 0.05}, ONE_TO_FIVE, low_confidence_below=0.5)
    assert result.low_confidence
    assert result.label_mass == pytest.approx(0.10)


def test_no_label_mass_is_an_error_not_a_score():
    with pytest.raises(NoLabelMass):
        estimate({}, ONE_TO_FIVE, 0.5)


def test_label_variants_are_summed():
    # "4" and " 4" are two tokens that spell one label.
    logprobs = {10: math.log(0.3), 11: math.log(0.2), 12: math.log(0.1)}
    plan = plan_label_reads({"4": (10,), "5": (12,), "3": (13,)}, {10: (10, 11)}, frozenset())
    assert len(plan.reads) == 1
    probs = plan.label_probabilities([logprobs])
    assert probs["4"] == pytest.approx(0.5)
    assert probs["5"] == pytest.approx(0.1)
    assert probs["3"] == 0.0


@pytest.mark.parametrize(
    "text, label",
    [("4", "4"), (" 3\n", "3"), ("5 - excellent", "5"), ("4.0", "4"), ("4.5", None), ("7", None), ("none", None),
     ("0", None)],
)
def test_sampled_answers_parse_to_labels_on_the_scale(text, label):
    assert parse_sampled_label(text, ONE_TO_FIVE) == label


@pytest.mark.parametrize(
    "text, label",
    [("10", "10"), (" 10\n", "10"), ("10/10", "10"), ("1", "1"), ("1.", "1"), ("9 out of 10", "9"), ("11", None),
     ("0", None)],
)
def test_sampled_answers_on_a_one_to_ten_scale_parse_whole_numbers(text, label):
    assert parse_sampled_label(text, Scale(1, 10)) == label


def test_samples_give_empirical_distribution_and_parse_share():
    result = estimate_from_samples(["4", "4", "5", "oops"], ONE_TO_FIVE, low_confidence_below=0.8)
    assert result.distribution["4"] == pytest.approx(2 / 3)
    assert result.expected_score == pytest.approx(13 / 3)
    assert result.label_mass == pytest.approx(0.75)
    assert result.low_confidence


def test_samples_with_no_score_are_an_error():
    with pytest.raises(NoLabelMass):
        estimate_from_samples(["no idea"] * 3, ONE_TO_FIVE, 0.5)


def test_weighted_reward_is_a_weighted_mean():
    assert weighted_reward([0.2, 0.8], [1.0, 3.0]) == pytest.approx(0.65)
    assert weighted_reward([0.2, 0.8], [0.0, 1.0]) == pytest.approx(0.8)
