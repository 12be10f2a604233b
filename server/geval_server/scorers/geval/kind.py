"""G-Eval as a kind (scorers/kind.py): the served rubrics (presets and `--rubrics` files),
callers' rubrics sent inline (RubricSelection.spec), each read at the judge's score slot, and
compared within groups through the judge's comparison prompts (groups/)."""

from __future__ import annotations

import asyncio
from typing import Any

from geval_client.pb import reward_pb2

from geval_server.scorers.geval.groups.comparer import GEvalComparer
from geval_server.scorers.geval.groups.judge import GroupJudge
from geval_server.scorers.geval.rubrics import DEFAULT_RUBRIC, Rubric, RubricError, load_rubrics, rubric_from_dict
from geval_server.scorers.geval.scorer import KIND, GEvalPreparer
from geval_server.scorers.kind import ScorerKind, Served, SpecError, StartContext

_SPEC_TEXT = [f for f in reward_pb2.RubricSpec.DESCRIPTOR.fields if f.type == f.TYPE_STRING]


class GEvalKind(ScorerKind):
    name = KIND
    needs_judge = True
    inline_field = "spec"

    def check(self, settings: Any, config: Any) -> dict[str, Rubric]:
        """The served rubrics, read before any engine starts so that a bad file fails at once."""
        return load_rubrics(config.rubric_paths)

    async def start(self, rubrics: dict[str, Rubric], context: StartContext) -> Served:
        judge, config = context.judge, context.config
        preparer = GEvalPreparer(judge.engine, judge.tokenization, judge.identity, config.low_confidence_below,
                                 config.defences.policy)
        preparer.comparer = GEvalComparer(GroupJudge(judge.engine, judge.tokenization, preparer.vocabulary),
                                          judge.model)
        served = await asyncio.gather(*(preparer.scorer(rubric) for rubric in rubrics.values()))  # steps in one batch
        return Served(list(served), inline={Rubric: preparer.scorer}, default=DEFAULT_RUBRIC)

    def inline_from_wire(self, spec: reward_pb2.RubricSpec, limits: Any) -> Rubric:
        """A rubric sent with the request, checked as a rubric file is (rubric_from_dict), its
        text under the same length limit as any other caller text."""
        data: dict = {}
        for described in _SPEC_TEXT:  # unset optional fields stay out, so the rubric's defaults apply
            if not described.has_presence or spec.HasField(described.name):
                data[described.name] = getattr(spec, described.name)
        for key, text in data.items():
            if len(text) > limits.max_field_chars:
                raise SpecError(key, f"{len(text)} characters exceed the limit of {limits.max_field_chars} "
                                     "(--max-field-chars)")
        data["uses_reference"] = spec.uses_reference
        if spec.HasField("scale"):
            data["scale"] = {"min": spec.scale.min, "max": spec.scale.max}
            if spec.scale.HasField("higher_is_better"):
                data["scale"]["higher_is_better"] = spec.scale.higher_is_better
        try:
            return rubric_from_dict(data, origin="")
        except RubricError as error:
            raise SpecError(error.key or "", str(error).removeprefix(": ")) from None
