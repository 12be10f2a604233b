"""A likelihood scorer's configuration: the fields of a rubric file with
`kind = "likelihood"`, checked once, and the loader that finds them among the rubric files."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from geval_server.scorers.geval.rubrics import RubricError, specs_of_kind


class Direction(enum.Enum):
    SOURCE = "source"  # log p(completion | source)
    REFERENCE = "reference"  # log p(completion | reference)
    REVERSE = "reverse"  # log p(reference | completion)
    F_MEAN = "f-mean"  # both reference directions, harmonic mean of their rewards


class Baseline(enum.Enum):
    NONE = "none"
    UNCONDITIONAL = "unconditional"  # PMI: minus log p(text | instruction alone)


@dataclass(frozen=True)
class LikelihoodSpec:
    """A likelihood scorer as a rubric file configures it (`kind = "likelihood"`)."""

    name: str
    criterion: str
    instruction: str  # the aspect instruction, right before the text read
    direction: Direction = Direction.SOURCE
    baseline: Baseline = Baseline.NONE
    max_copy_rate: float | None = None  # share of the completion's 5-grams found in the source
    max_repetition_rate: float | None = None  # share of its 3-grams repeating an earlier one
    source_label: str = "Article"
    target_label: str = "Summary"
    reference_label: str = "Reference"

    @property
    def uses_reference(self) -> bool:
        return self.direction is not Direction.SOURCE

    def describe(self) -> str:
        """What the score is, for GetInfo."""
        read = {
            Direction.SOURCE: "mean log p(completion | source, instruction)",
            Direction.REFERENCE: "mean log p(completion | reference, instruction)",
            Direction.REVERSE: "mean log p(reference | completion, instruction)",
            Direction.F_MEAN: "both reference directions, harmonic mean of their rewards",
        }[self.direction]
        if self.baseline is Baseline.UNCONDITIONAL:
            mapping = "minus log p(text | instruction alone) (PMI, nats per token); reward = logistic(PMI)"
        else:
            mapping = "reward = exp(mean log p), the geometric-mean token probability"
        guards = []
        if self.max_copy_rate is not None:
            guards.append(f"a copy rate from the source over {self.max_copy_rate}")
        if self.max_repetition_rate is not None:
            guards.append(f"a repetition rate over {self.max_repetition_rate}")
        guarded = f"; reward scaled down for {' and '.join(guards)}" if guards else ""
        return f"Likelihood (GPTScore-style): {read}; {mapping}{guarded}."


_TEXT = ("name", "criterion", "instruction", "source_label", "target_label", "reference_label")
_KNOWN_KEYS = {"kind", *_TEXT, "direction", "baseline", "max_copy_rate", "max_repetition_rate"}


def spec_from_dict(data: dict, origin: str) -> LikelihoodSpec:
    """The one check of a likelihood file's fields; errors name the origin and the field."""
    unknown = sorted(set(data) - _KNOWN_KEYS)
    if unknown:
        raise RubricError(f"{origin}: unknown field(s) {unknown}; known: {sorted(_KNOWN_KEYS)}")
    for key in _TEXT:
        required = key in ("name", "criterion", "instruction")
        if (required or key in data) and (not isinstance(data.get(key), str) or not data[key].strip()):
            raise RubricError(f"{origin}: field '{key}' must be a non-empty string", key)
    fields = {key: data[key].strip() for key in _TEXT if key in data}
    for key, kind in (("direction", Direction), ("baseline", Baseline)):
        if key in data:
            choices = [member.value for member in kind]
            if data[key] not in choices:
                raise RubricError(f"{origin}: field '{key}' must be one of {choices}, got {data[key]!r}", key)
            fields[key] = kind(data[key])
    for key in ("max_copy_rate", "max_repetition_rate"):
        if key in data:
            value = data[key]
            if type(value) not in (int, float) or not 0.0 <= value < 1.0:
                raise RubricError(f"{origin}: field '{key}' must be a number in [0, 1), got {value!r}", key)
            fields[key] = float(value)
    return LikelihoodSpec(**fields)


def load_specs(files: Sequence[tuple[object, dict]]) -> dict[str, LikelihoodSpec]:
    """The likelihood scorers among rubric files (rubrics.rubric_files), by name."""
    return specs_of_kind(files, "likelihood", spec_from_dict)
