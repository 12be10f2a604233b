"""The G-Eval score: label probabilities at the score slot -> expected score -> reward.

Pure math, no engine: the judge's probabilities over the score labels are
renormalized and turned into the expectation E[s] = sum_k value_k * p_k, so a
judge split evenly between 3 and 4 gives 3.5 rather than an argmax of 3 or 4.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from geval_server.scorers.base import ReadFailure


class NoLabelMass(ReadFailure):
    """The judge put no probability on any score label (or no sample parsed)."""


@dataclass(frozen=True)
class Scale:
    """Integer score labels min..max; lower_is_better reverses the reward."""

    min_score: int
    max_score: int
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        if self.max_score <= self.min_score:
            raise ValueError(
                f"scale.max ({self.max_score}) must be greater than scale.min ({self.min_score})"
            )

    # Kept on the scale: every read of a rubric's labels asks for them (estimate).
    @functools.cached_property
    def labels(self) -> tuple[str, ...]:
        return tuple(str(v) for v in range(self.min_score, self.max_score + 1))

    @functools.cached_property
    def values(self) -> tuple[float, ...]:
        """Each label's value, in the labels' order."""
        return tuple(float(int(label)) for label in self.labels)

    def reward(self, expected_score: float) -> float:
        """Maps a score on this scale into [0, 1], 1 being best."""
        fraction = (expected_score - self.min_score) / (self.max_score - self.min_score)
        fraction = min(1.0, max(0.0, fraction))
        return fraction if self.higher_is_better else 1.0 - fraction


@dataclass(frozen=True)
class ScoreEstimate:
    distribution: dict[str, float]  # label -> probability, renormalized, in scale order
    expected_score: float
    reward: float
    label_mass: float
    top_label: str
    low_confidence: bool


def estimate(
    label_probs: Mapping[str, float], scale: Scale, low_confidence_below: float
) -> ScoreEstimate:
    """Renormalizes raw label probabilities (which need not sum to 1) and scores them."""
    raw = [max(0.0, float(label_probs.get(label, 0.0))) for label in scale.labels]
    mass = sum(raw)
    if not mass > 0.0 or not math.isfinite(mass):
        raise NoLabelMass("the judge put no probability on any score label")
    probabilities = [p / mass for p in raw]
    distribution = dict(zip(scale.labels, probabilities))
    expected = sum(value * p for value, p in zip(scale.values, probabilities))
    return ScoreEstimate(
        distribution=distribution,
        expected_score=expected,
        reward=scale.reward(expected),
        label_mass=min(1.0, mass),
        top_label=max(distribution, key=distribution.__getitem__),
        low_confidence=mass < low_confidence_below,
    )


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def parse_sampled_label(text: str, scale: Scale) -> str | None:
    """The label a sampled answer gives: its first number, if that is on the scale."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    number = float(match.group())
    if not number.is_integer() or str(int(number)) not in scale.labels:
        return None
    return str(int(number))


def estimate_from_samples(
    samples: Sequence[str], scale: Scale, low_confidence_below: float,
    parse: Callable[[str, Scale], str | None] = parse_sampled_label,
) -> ScoreEstimate:
    """Empirical distribution of the labels the samples give (`parse`: a G-Eval answer's first
    number; a template reads its own labels); label mass is the share that gave one."""
    parsed = [parse(text, scale) for text in samples]
    counts = Counter(label for label in parsed if label is not None)
    if not counts:
        raise NoLabelMass(f"none of the {len(samples)} samples gave a score on the scale")
    result = estimate(counts, scale, low_confidence_below=0.0)
    share = sum(counts.values()) / len(samples)
    return ScoreEstimate(
        distribution=result.distribution,
        expected_score=result.expected_score,
        reward=result.reward,
        label_mass=share,
        top_label=result.top_label,
        low_confidence=share < low_confidence_below,
    )
