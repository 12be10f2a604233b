"""A template rubric's fields (a rubric file with `kind = "template"`, or a TemplateSpec sent
inline), checked once; and the loader that finds them among the rubric files.

A template is a generative judge's own user turn (Prometheus 2's absolute or relative
prompt, a pairwise critic's, a reasoning reward model's) with placeholders for the item's
text, and its verdict, the text its reply is pre-filled with before the label.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from geval_server.scorers.geval.rubrics import RubricError, specs_of_kind
from geval_server.scorers.template.labels import Labels, labels_from_dict

POINTWISE_FIELDS = ("prompt", "completion", "reference")
PAIRWISE_FIELDS = ("prompt", "a", "b", "reference")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")  # `{completion}`; JSON's `{"k": 1}` is no placeholder
_WORDS = re.compile(r"[^\W\d_]+")
_KNOWN_KEYS = {"kind", "name", "template", "verdict", "scale", "choices", "reasoning", "criterion"}


@dataclass(frozen=True)
class TemplateSpec:
    wire_field: ClassVar[str] = "template"  # sent inline in RubricSelection.template (kind.py)
    name: str
    template: str
    verdict: str
    labels: Labels
    reasoning: bool = False
    criterion: str = ""  # the word claims are removed for; empty: default_criterion(verdict)

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(PLACEHOLDER.findall(self.template))

    @property
    def pairwise(self) -> bool:
        return "a" in self.placeholders

    @property
    def uses_reference(self) -> bool:
        return "reference" in self.placeholders

    @property
    def defended_criterion(self) -> str:
        return self.criterion or default_criterion(self.verdict)


def default_criterion(verdict: str) -> str:
    """The verdict's words (`[RESULT]` gives RESULT, `<answer>` answer), else `Verdict`: the
    anchor the score-claim removal and the bounded read look for in a completion."""
    return " ".join(_WORDS.findall(verdict)) or "Verdict"


def spec_from_dict(data: dict, origin: str) -> TemplateSpec:
    """The one check of a template's fields; errors start with `origin` (a file, or the request
    field that carried it) and name the field."""
    unknown = sorted(set(data) - _KNOWN_KEYS)
    if unknown:
        raise RubricError(f"{origin}: unknown field(s) {unknown}; known: {sorted(_KNOWN_KEYS)}")
    for key in ("name", "template", "verdict"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise RubricError(f"{origin}: field '{key}' is required and must be a non-empty string", key)
    if "criterion" in data and (not isinstance(data["criterion"], str) or not _WORDS.search(data["criterion"])):
        raise RubricError(f"{origin}: field 'criterion' must be a word when given", "criterion")
    if "reasoning" in data and not isinstance(data["reasoning"], bool):
        raise RubricError(f"{origin}: field 'reasoning' must be true or false", "reasoning")
    template = data["template"]
    found = PLACEHOLDER.findall(template)
    pairwise = "a" in found or "b" in found
    allowed = PAIRWISE_FIELDS if pairwise else POINTWISE_FIELDS
    for name in found:
        if name not in allowed:
            raise RubricError(f"{origin}: field 'template': placeholder {{{name}}} is not one of "
                              f"{['{' + f + '}' for f in allowed]}" + (" (a pairwise template reads {a} and {b})"
                                                                       if pairwise else ""), "template")
    needed = ("a", "b") if pairwise else ("completion",)
    for name in needed:
        if name not in found:
            raise RubricError(f"{origin}: field 'template' must hold {{{name}}}", "template")
    return TemplateSpec(
        name=data["name"].strip(), template=template, verdict=data["verdict"].strip(),
        labels=labels_from_dict(data, origin), reasoning=data.get("reasoning", False),
        criterion=data.get("criterion", "").strip(),
    )


def load_specs(files: Sequence[tuple[object, dict]]) -> dict[str, TemplateSpec]:
    """The templates among rubric files (rubrics.rubric_files), by name."""
    return specs_of_kind(files, "template", spec_from_dict)
