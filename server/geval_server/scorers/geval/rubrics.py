"""Rubrics: what the judge is asked, loaded from TOML files (presets ship in presets/)
or sent by the caller with a request (the same fields, checked the same way).

A rubric holds the G-Eval prompt parts: task introduction, evaluation
criteria, optional evaluation steps (generated once by the judge when absent,
see autocot.py), the section labels, and the score scale.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from geval_server.scorers.base import Unservable
from geval_server.scorers.geval.expected_score import Scale

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

PRESET_DIR = pathlib.Path(__file__).parents[2] / "presets"
DEFAULT_RUBRIC = "overall-quality"
KINDS = ("geval", "likelihood", "template")  # a rubric file's `kind`: which scorer it configures

_REQUIRED_TEXT = ("name", "criterion", "task_introduction", "evaluation_criteria")
_OPTIONAL_TEXT = ("evaluation_steps", "source_label", "target_label", "reference_label")
_KNOWN_KEYS = set(_REQUIRED_TEXT) | set(_OPTIONAL_TEXT) | {"uses_reference", "scale"}


class RubricError(Unservable):
    """A rubric is malformed; the message names where it came from and the field,
    `key` holds the field (None when the rubric as a whole is at fault)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Rubric:
    wire_field: ClassVar[str] = "spec"  # sent inline in RubricSelection.spec (kind.py)
    name: str
    criterion: str  # as in the form: "- Coherence:"
    task_introduction: str
    evaluation_criteria: str
    scale: Scale
    evaluation_steps: str | None = None
    steps_generated: bool = False
    uses_reference: bool = False
    source_label: str = "Source Text"
    target_label: str = "Summary"
    reference_label: str = "Reference"

    def with_generated_steps(self, steps: str) -> Rubric:
        return dataclasses.replace(self, evaluation_steps=steps, steps_generated=True)

    def content_hash(self, judge_model: str, layout: str = "") -> str:
        """sha256 over every prompt-shaping field, the judge and the prompt layout's
        fingerprint: equal hash, equal prompts."""
        fields = dataclasses.asdict(self)
        fields["judge_model"] = judge_model
        fields["layout"] = layout
        blob = json.dumps(fields, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()


def read_toml(path: pathlib.Path) -> dict:
    """A rubric file's fields, unchecked."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise RubricError(f"{path}: cannot read rubric: {err}") from err


def load_rubric(path: pathlib.Path) -> Rubric:
    data = read_toml(path)
    if file_kind(data, path) != "geval":
        raise RubricError(f"{path}: a {data['kind']} scorer file, not a G-Eval rubric", "kind")
    return rubric_from_dict({key: value for key, value in data.items() if key != "kind"}, origin=str(path))


def rubric_from_dict(data: dict, origin: str) -> Rubric:
    """The one check of a rubric's fields; errors start with `origin` (a file, or the
    request field that carried the rubric) and name the field."""
    unknown = sorted(set(data) - _KNOWN_KEYS)
    if unknown:
        raise RubricError(f"{origin}: unknown field(s) {unknown}; known: {sorted(_KNOWN_KEYS)}")
    for key in _REQUIRED_TEXT:
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise RubricError(f"{origin}: field '{key}' is required and must be a non-empty string", key)
    for key in _OPTIONAL_TEXT:
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            raise RubricError(f"{origin}: field '{key}' must be a non-empty string when given", key)
    if "uses_reference" in data and not isinstance(data["uses_reference"], bool):
        raise RubricError(f"{origin}: field 'uses_reference' must be true or false", "uses_reference")
    scale = _scale_from_dict(data.get("scale"), origin)
    text = {key: data[key].strip() for key in _REQUIRED_TEXT + _OPTIONAL_TEXT if key in data}
    return Rubric(scale=scale, uses_reference=data.get("uses_reference", False), **text)


def _scale_from_dict(scale: object, origin: str) -> Scale:
    if not isinstance(scale, dict):
        raise RubricError(f"{origin}: field 'scale' (the [scale] table) with integer 'min' and 'max' is required",
                          "scale")
    unknown = sorted(set(scale) - {"min", "max", "higher_is_better"})
    if unknown:
        raise RubricError(f"{origin}: unknown field(s) in [scale]: {unknown}", "scale")
    low, high = scale.get("min"), scale.get("max")
    if type(low) is not int or type(high) is not int:
        raise RubricError(f"{origin}: scale.min and scale.max must be integers", "scale")
    if high <= low:
        raise RubricError(f"{origin}: scale.max ({high}) must be greater than scale.min ({low})", "scale")
    higher_is_better = scale.get("higher_is_better", True)
    if not isinstance(higher_is_better, bool):
        raise RubricError(f"{origin}: scale.higher_is_better must be true or false", "scale")
    return Scale(low, high, higher_is_better)


def rubric_files(extra_paths: list[pathlib.Path] = ()) -> list[tuple[pathlib.Path, dict]]:
    """Every preset and custom rubric file (a file or a directory of *.toml) with its
    fields, presets first, so a custom file may replace a preset of the same name."""
    files = sorted(PRESET_DIR.glob("*.toml"))
    for path in extra_paths:
        if path.is_dir():
            files.extend(sorted(path.glob("*.toml")))
        elif path.exists():
            files.append(path)
        else:
            raise RubricError(f"{path}: no such rubric file or directory")
    return [(path, read_toml(path)) for path in files]


def file_kind(data: dict, path: pathlib.Path) -> str:
    """What a rubric file configures: `kind = "geval"` (the default), `"likelihood"` or `"template"`."""
    kind = data.get("kind", "geval")
    if kind not in KINDS:
        raise RubricError(f"{path}: field 'kind' must be one of {list(KINDS)}, got {kind!r}", "kind")
    return kind


Spec = TypeVar("Spec")  # a kind's spec read from a rubric file: it has a name


def specs_of_kind(files: Sequence[tuple[object, dict]], kind: str, read: Callable[[dict, str], Spec]
                  ) -> dict[str, Spec]:
    """The specs of one kind among rubric files (rubric_files), by name, each made by
    read(data, origin); a later file's spec replaces an earlier one of its name."""
    specs: dict[str, Spec] = {}
    for path, data in files:
        if file_kind(data, path) == kind:
            spec = read(data, str(path))
            specs[spec.name] = spec
    return specs


def load_rubrics(extra_paths: list[pathlib.Path] = ()) -> dict[str, Rubric]:
    """The G-Eval rubrics among the presets and custom rubric files."""
    return specs_of_kind(rubric_files(extra_paths), "geval", lambda data, origin: rubric_from_dict(
        {key: value for key, value in data.items() if key != "kind"}, origin))
