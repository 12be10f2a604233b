"""Templates as a kind (scorers/kind.py): a generative judge's own prompt and verdict, from
rubric files with `kind = "template"` (`--rubrics`), the shipped judge presets
(`--template-presets`: Prometheus 2, a pairwise critic, an `<answer>`-tag reward model) and
sent inline (RubricSelection.template); in groups a pairwise one compares the members in
both orders (comparer.py), a pointwise one scores each member alone.

The presets are served only when asked for: every served scorer's criterion joins the
score-claim removal of every call (judge/judge.py), and theirs (`RESULT`, `answer`) would
start removing `the answer: 12` from completions read by every other rubric."""

from __future__ import annotations

import argparse
import asyncio
import pathlib
from typing import Any

from geval_client.pb import reward_pb2

from geval_server.groupwise.comparer import PointwiseComparer
from geval_server.scorers.geval.rubrics import PRESET_DIR, RubricError, read_toml, rubric_files
from geval_server.scorers.geval.slot import LabelVocabulary
from geval_server.scorers.kind import JudgeContext, ScorerKind, Served, SpecError, StartContext
from geval_server.scorers.template.comparer import TemplateComparer
from geval_server.scorers.template.scorer import KIND, TemplateScorer, prepare_template
from geval_server.scorers.template.spec import TemplateSpec, load_specs, spec_from_dict

TEMPLATE_PRESETS = PRESET_DIR / "templates"


def preset_paths() -> list[pathlib.Path]:
    """The shipped template files."""
    return sorted(TEMPLATE_PRESETS.glob("*.toml"))


class TemplatePreparer:
    """Turns templates into scorers on one judge: the served ones at start-up, callers' as they arrive."""

    def __init__(self, judge: JudgeContext, low_confidence_below: float, policy: str) -> None:
        self._judge = judge
        self._vocabulary = LabelVocabulary(judge.tokenization)  # once: it walks the vocabulary
        self._low = low_confidence_below
        self._policy = policy
        self._pointwise = PointwiseComparer()
        self._pairwise = TemplateComparer()

    async def scorer(self, spec: TemplateSpec) -> TemplateScorer:
        judge = self._judge
        prepared = prepare_template(judge.tokenization, self._vocabulary, spec, judge.identity, self._policy)
        comparer = self._pairwise if spec.pairwise else self._pointwise
        return TemplateScorer(prepared, judge.engine, self._low, comparer)


class TemplateKind(ScorerKind):
    name = KIND
    needs_judge = True
    inline_field = "template"

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("judge templates")
        group.add_argument("--template-presets", action="store_true",
                           help="also serve the shipped judge templates (Prometheus 2 absolute and relative, a "
                                "pairwise [[A]]/[[B]] critic, an <answer>-tag reward model); files with "
                                "kind = \"template\" given to --rubrics are served either way")

    def settings(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> bool:
        return args.template_presets

    def check(self, presets: bool, config: Any) -> dict[str, TemplateSpec]:
        """The served templates, read before any engine starts so that a bad file fails at once."""
        files = [(path, read_toml(path)) for path in preset_paths()] if presets else []
        return load_specs(files + rubric_files(config.rubric_paths))

    async def start(self, specs: dict[str, TemplateSpec], context: StartContext) -> Served:
        preparer = TemplatePreparer(context.judge, context.config.low_confidence_below,
                                    context.config.defences.policy)
        served = await asyncio.gather(*(preparer.scorer(spec) for spec in specs.values()))
        return Served(list(served), inline={TemplateSpec: preparer.scorer})

    def inline_from_wire(self, message: reward_pb2.TemplateSpec, limits: Any) -> TemplateSpec:
        """A template sent with the request, checked as a template file is, its text under the
        same length limit as any other caller text."""
        data: dict[str, Any] = {"name": message.name, "template": message.template, "verdict": message.verdict}
        for key in ("template", "verdict"):
            if len(data[key]) > limits.max_field_chars:
                raise SpecError(key, f"{len(data[key])} characters exceed the limit of {limits.max_field_chars} "
                                     "(--max-field-chars)")
        if message.HasField("scale"):
            data["scale"] = {"min": message.scale.min, "max": message.scale.max}
            if message.scale.HasField("higher_is_better"):
                data["scale"]["higher_is_better"] = message.scale.higher_is_better
        if message.choices:
            data["choices"] = list(message.choices)
        if message.reasoning:
            data["reasoning"] = True
        if message.HasField("criterion"):
            data["criterion"] = message.criterion
        try:
            return spec_from_dict(data, origin="")
        except RubricError as error:
            raise SpecError(error.key or "", str(error).removeprefix(": ")) from None
