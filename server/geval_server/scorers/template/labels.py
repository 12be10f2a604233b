"""A template's labels: a scale of integers (G-Eval's Scale) or named choices worst to best
(`["B", "A"]`, `["No", "Yes"]`). Both give what expected_score.estimate reads (labels, their
values, the reward of an expectation), so a choice's probabilities become E[s], label mass
and low_confidence exactly as a score's do."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from geval_server.scorers.geval.expected_score import Scale, parse_sampled_label
from geval_server.scorers.geval.rubrics import RubricError


@dataclass(frozen=True)
class Choices:
    """Labels worst to best, valued 0..n-1: the reward is E[value] / (n - 1), so with two
    choices it is the probability of the better one (a pairwise judge's P(A))."""

    labels: tuple[str, ...]
    higher_is_better: bool = True

    @property
    def min_score(self) -> int:
        return 0

    @property
    def max_score(self) -> int:
        return len(self.labels) - 1

    @functools.cached_property
    def values(self) -> tuple[float, ...]:
        return tuple(float(i) for i in range(len(self.labels)))

    def reward(self, expected_score: float) -> float:
        return min(1.0, max(0.0, expected_score / self.max_score))


Labels = Scale | Choices


def sampled_label(text: str, labels: Labels) -> str | None:
    """The label a reply sampled right after the verdict gives: a scale's first number, as a
    G-Eval sample is read; a choice the one the reply begins with (choices never begin one
    another, so at most one does)."""
    if isinstance(labels, Scale):
        return parse_sampled_label(text, labels)
    reply = text.lstrip()
    return next((label for label in labels.labels if reply.startswith(label)), None)


def labels_from_dict(data: dict, origin: str) -> Labels:
    """Exactly one of `scale` (the [scale] table, as a G-Eval rubric's) and `choices`."""
    if ("scale" in data) == ("choices" in data):
        raise RubricError(f"{origin}: give exactly one of 'scale' (integer min and max) and 'choices' "
                          "(labels worst to best)", "scale" if "scale" in data else "choices")
    if "scale" in data:
        scale = data["scale"]
        if not isinstance(scale, dict) or set(scale) - {"min", "max", "higher_is_better"}:
            raise RubricError(f"{origin}: field 'scale' must be a table of integer 'min' and 'max' "
                              "(and higher_is_better)", "scale")
        low, high = scale.get("min"), scale.get("max")
        if type(low) is not int or type(high) is not int or high <= low:
            raise RubricError(f"{origin}: scale.min and scale.max must be integers with max > min, got "
                              f"{low!r} and {high!r}", "scale")
        higher = scale.get("higher_is_better", True)
        if not isinstance(higher, bool):
            raise RubricError(f"{origin}: scale.higher_is_better must be true or false", "scale")
        return Scale(low, high, higher)
    choices = data["choices"]
    if (not isinstance(choices, list | tuple) or len(choices) < 2
            or not all(isinstance(c, str) and c.strip() == c and c for c in choices)):
        raise RubricError(f"{origin}: field 'choices' must list at least two labels worst to best, each a "
                          f"non-empty string without surrounding spaces, got {choices!r}", "choices")
    for label in choices:
        longer = next((other for other in choices if other != label and other.startswith(label)), None)
        if longer is not None:  # the read could not tell where `A` ends and `AB` goes on
            raise RubricError(f"{origin}: choice {label!r} begins choice {longer!r}; choices must not begin "
                              "one another", "choices")
    if len(set(choices)) != len(choices):
        raise RubricError(f"{origin}: field 'choices' lists a label twice: {choices!r}", "choices")
    return Choices(tuple(choices))
