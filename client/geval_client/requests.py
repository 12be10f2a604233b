"""Builds ScoreRequest protos from plain Python values.

A rubric is chosen by the name the server serves it under, or sent whole as a
dict with the keys of a rubric file (`name`, `criterion`, `task_introduction`,
`evaluation_criteria`, optional `evaluation_steps`, `source_label`,
`target_label`, `reference_label`, `uses_reference`, and `scale` as
`{"min": 1, "max": 5, "higher_is_better": True}`). A verifiable rule is sent as a
dict with `name` and either `regex` (a pattern the completion must match) or `json`
(True, or a JSON Schema as a dict or its JSON text, the completion must validate against).
A judge's own prompt and verdict is sent as a dict with `template` (its user turn, with
`{prompt}`, `{completion}`, `{reference}` or `{a}` and `{b}`), `verdict`, `name`, and `scale`
or `choices` (worst to best), optional `reasoning` and `criterion`.
A gate (`gate=`) is a rule's name or such a dict. Process rewards take their steps from
`steps=` (a delimiter, a reduction) or an item's own `steps` list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .pb import reward_pb2
from .types import Logprobs, ScoringMode, apply_mode

Prompt = str | Sequence[Mapping[str, str]]
Rubric = str | Mapping[str, Any]  # a served name, or a rubric dict
# A name or rubric dict; a {name: weight} mapping; or a list of names, rubric dicts and
# (name or rubric dict, weight) pairs. Weights default to 1.
Rubrics = Rubric | Mapping[str, float] | Sequence[Rubric | tuple[Rubric, float]] | None

# The wire contract (RubricSpec) is the one list of a rubric's fields.
_SPEC_TEXT = tuple(f.name for f in reward_pb2.RubricSpec.DESCRIPTOR.fields if f.type == f.TYPE_STRING)
_SPEC_KEYS = {f.name for f in reward_pb2.RubricSpec.DESCRIPTOR.fields}


def make_item(
    prompt: Prompt, completion: str, reference: str | None = None, item_id: str = "", rubrics: Rubrics = None,
    steps: Sequence[str] | None = None,
) -> reward_pb2.Item:
    """prompt: plain text, or chat messages as dicts with "role" and "content".
    rubrics: this item's own rubrics, scored instead of the request's.
    steps: the completion's reasoning steps for process rewards, instead of splitting it (with
    an empty completion, the completion is the steps joined by blank lines)."""
    item = reward_pb2.Item(id=item_id, completion=completion, rubrics=rubric_selection(rubrics), steps=steps or ())
    if isinstance(prompt, str):
        item.text = prompt
    else:
        item.chat.messages.extend(
            reward_pb2.ChatMessage(role=m["role"], content=m["content"]) for m in prompt
        )
    if reference is not None:
        item.reference = reference
    return item


def as_item(value: Any) -> reward_pb2.Item:
    """An Item, or a dict with prompt, completion (optional with steps) and optional reference,
    id, steps, and the item's own rubric (`rubric`: a name or rubric dict) or rubrics
    (`rubrics`, as in score())."""
    if isinstance(value, reward_pb2.Item):
        return value
    if "rubric" in value and "rubrics" in value:
        raise ValueError("an item takes 'rubric' or 'rubrics', not both")
    rubrics = [value["rubric"]] if value.get("rubric") is not None else value.get("rubrics")
    return make_item(
        value["prompt"], value.get("completion", ""), value.get("reference"), str(value.get("id", "")), rubrics,
        value.get("steps"),
    )


def rubric_spec(rubric: Mapping[str, Any]) -> reward_pb2.RubricSpec:
    """A rubric dict as sent on the wire; the server checks every field and names the bad one."""
    unknown = sorted(set(rubric) - _SPEC_KEYS)
    if unknown:
        raise ValueError(f"unknown rubric field(s) {unknown}; known: {sorted(_SPEC_KEYS)}")
    spec = reward_pb2.RubricSpec(**{key: rubric[key] for key in _SPEC_TEXT if rubric.get(key) is not None})
    spec.uses_reference = bool(rubric.get("uses_reference", False))
    scale = rubric.get("scale")
    if scale is not None and not isinstance(scale, Mapping):
        raise ValueError(f"rubric field 'scale' must be a dict with 'min' and 'max', got {type(scale).__name__}")
    if scale is not None:
        spec.scale.min, spec.scale.max = scale.get("min", 0), scale.get("max", 0)
        if "higher_is_better" in scale:
            spec.scale.higher_is_better = scale["higher_is_better"]
    return spec


def rule_spec(rule: Mapping[str, Any]) -> reward_pb2.RuleSpec:
    """A rule dict as sent on the wire: `{"name": ..., "regex": PATTERN}` or
    `{"name": ..., "json": True | SCHEMA}`; the server compiles it and names a bad field."""
    unknown = sorted(set(rule) - {"name", "regex", "json"})
    if unknown or ("regex" in rule) == ("json" in rule):
        raise ValueError(f"a rule dict has 'name' and one of 'regex' or 'json', got keys {sorted(rule)}")
    spec = reward_pb2.RuleSpec(name=str(rule.get("name", "")))
    if "regex" in rule:
        spec.regex.pattern = rule["regex"]
    else:
        schema = rule["json"]
        spec.json.SetInParent()
        if schema is not True:
            spec.json.schema = schema if isinstance(schema, str) else json.dumps(schema)
    return spec


_TEMPLATE_KEYS = {"name", "template", "verdict", "scale", "choices", "reasoning", "criterion"}


def template_spec(template: Mapping[str, Any]) -> reward_pb2.TemplateSpec:
    """A template dict as sent on the wire; the server checks every field and names the bad one."""
    unknown = sorted(set(template) - _TEMPLATE_KEYS)
    if unknown:
        raise ValueError(f"unknown template field(s) {unknown}; known: {sorted(_TEMPLATE_KEYS)}")
    spec = reward_pb2.TemplateSpec(name=str(template.get("name", "")), template=template["template"],
                                   verdict=str(template.get("verdict", "")),
                                   choices=list(template.get("choices", ())),
                                   reasoning=bool(template.get("reasoning", False)))
    if template.get("criterion") is not None:
        spec.criterion = template["criterion"]
    scale = template.get("scale")
    if scale is not None:
        spec.scale.min, spec.scale.max = scale.get("min", 0), scale.get("max", 0)
        if "higher_is_better" in scale:
            spec.scale.higher_is_better = scale["higher_is_better"]
    return spec


def _is_rule(rubric: Mapping[str, Any]) -> bool:
    return "regex" in rubric or "json" in rubric


def rubric_selection(rubrics: Rubrics) -> list[reward_pb2.RubricSelection]:
    if rubrics is None:
        return []
    if isinstance(rubrics, str) or (isinstance(rubrics, Mapping) and _is_rubric(rubrics)):
        return [_choice(rubrics)]
    if isinstance(rubrics, Mapping):
        return [_choice(name, weight) for name, weight in rubrics.items()]
    return [_choice(*entry) if isinstance(entry, tuple) else _choice(entry) for entry in rubrics]


def _is_rubric(mapping: Mapping) -> bool:
    """A rubric dict, as opposed to a {name: weight} mapping (whose values are numbers)."""
    return not all(isinstance(v, int | float) and not isinstance(v, bool) for v in mapping.values())


def _choice(rubric: Rubric, weight: float | None = None) -> reward_pb2.RubricSelection:
    choice = reward_pb2.RubricSelection()
    if isinstance(rubric, str):
        choice.name = rubric
    elif _is_rule(rubric):
        choice.rule.CopyFrom(rule_spec(rubric))
    elif "template" in rubric:
        choice.template.CopyFrom(template_spec(rubric))
    else:
        choice.spec.CopyFrom(rubric_spec(rubric))
    if weight is not None:
        choice.weight = weight
    return choice


def prepare_request(rubrics: Rubrics) -> reward_pb2.PrepareRubricsRequest:
    """The PrepareRubrics request for rubrics in any form score() takes (weights are not read).
    G-Eval rubrics alone go in `rubrics`, which servers from before `selections` read too."""
    selections = rubric_selection(rubrics)
    if not selections:
        raise ValueError("prepare_rubrics: send at least one rubric")
    if all(selection.WhichOneof("rubric") == "spec" for selection in selections):
        return reward_pb2.PrepareRubricsRequest(rubrics=[selection.spec for selection in selections])
    return reward_pb2.PrepareRubricsRequest(selections=selections)


def apply_gate(request: reward_pb2.ScoreRequest | reward_pb2.ScoreGroupsRequest, gate: Rubric | None,
               gate_reward: float | None) -> None:
    """gate: a rule (a served rule's name, or a rule dict) checked first: an item that fails it
    gets gate_reward (None: the server's 0.0) and no other rubric reads it."""
    if gate is None:
        if gate_reward is not None:
            raise ValueError("gate_reward is read only with a gate")
        return
    request.gate.CopyFrom(_choice(gate))
    if gate_reward is not None:
        request.gate_reward = gate_reward


def check_steps(steps: Mapping[str, str]) -> None:
    """Refuses a steps option with a key the server does not read, so that a trainer's
    misspelt option fails when configured, not on its first batch."""
    unknown = set(steps) - {"delimiter", "reduction"}
    if unknown:
        raise ValueError(f"steps: unknown keys {sorted(unknown)}; known: delimiter, reduction")


def apply_steps(request: reward_pb2.ScoreRequest | reward_pb2.ScoreGroupsRequest,
                steps: Mapping[str, str] | None) -> None:
    """steps: how process rewards split and reduce, {"delimiter": "...", "reduction": "min"}
    (either key; unset: blank lines and the scorer's own reduction)."""
    if steps is None:
        return
    check_steps(steps)
    request.steps.SetInParent()
    if steps.get("delimiter") is not None:
        request.steps.delimiter = steps["delimiter"]
    request.steps.reduction = steps.get("reduction") or ""


def score_request(
    items: Sequence[Any], rubrics: Rubrics = None, mode: ScoringMode = Logprobs(), gate: Rubric | None = None,
    gate_reward: float | None = None, steps: Mapping[str, str] | None = None,
) -> reward_pb2.ScoreRequest:
    """The request for items, scored with rubrics in mode (how G-Eval rubrics read the slot),
    behind gate where one is given (apply_gate), process rewards' steps as `steps` says (apply_steps)."""
    request = reward_pb2.ScoreRequest(items=[as_item(item) for item in items], rubrics=rubric_selection(rubrics))
    apply_mode(request, mode)
    apply_gate(request, gate, gate_reward)
    apply_steps(request, steps)
    return request


_SCHEDULES = {None: reward_pb2.SCHEDULE_UNSPECIFIED, "all_pairs": reward_pb2.SCHEDULE_ALL_PAIRS,
              "neighbours": reward_pb2.SCHEDULE_NEIGHBOURS, "anchor": reward_pb2.SCHEDULE_ANCHOR,
              "listwise": reward_pb2.SCHEDULE_LISTWISE}
_AGGREGATIONS = {"mean_win_probability": reward_pb2.AGGREGATION_MEAN_WIN_PROBABILITY,
                 "bradley_terry": reward_pb2.AGGREGATION_BRADLEY_TERRY}


def check_group_options(schedule: str | None, aggregation: str) -> None:
    """A ValueError naming the choices, so that an adapter refuses a bad option when it is configured."""
    if schedule not in _SCHEDULES:
        raise ValueError(f"schedule must be one of {sorted(k for k in _SCHEDULES if k)} or None, got {schedule!r}")
    if aggregation not in _AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {sorted(_AGGREGATIONS)}, got {aggregation!r}")


def group_request(
    groups: Sequence[Mapping[str, Any]],
    rubrics: Rubrics = None,
    schedule: str | None = None,
    aggregation: str = "mean_win_probability",
    neighbours: int | None = None,
    anchor: str | None = None,
    mode: ScoringMode = Logprobs(),
    dry_run: bool = False,
    gate: Rubric | None = None,
    gate_reward: float | None = None,
    steps: Mapping[str, str] | None = None,
) -> reward_pb2.ScoreGroupsRequest:
    """groups: dicts with `prompt` (text or chat messages), `completions` (a list) and
    optionally `reference` and `id`. schedule: None (all pairs up to 8, neighbours beyond),
    "all_pairs", "neighbours", "anchor" or "listwise"; aggregation: "mean_win_probability" or
    "bradley_terry" (not with "anchor" or "listwise"); mode: how each verdict is read,
    Logprobs(), Reasoning(max_tokens) or Sampling(n); dry_run: the cost only, nothing read;
    gate: a rule a completion must pass to be compared (apply_gate); steps: how process rewards,
    which score each completion alone, split and reduce it (apply_steps)."""
    check_group_options(schedule, aggregation)
    request = reward_pb2.ScoreGroupsRequest(
        rubrics=rubric_selection(rubrics), schedule=_SCHEDULES[schedule], aggregation=_AGGREGATIONS[aggregation],
        neighbours=neighbours or 0, dry_run=dry_run,
    )
    apply_mode(request, mode)
    apply_gate(request, gate, gate_reward)
    apply_steps(request, steps)
    if anchor is not None:
        request.anchor = anchor
    for group in groups:
        unknown = sorted(set(group) - {"prompt", "completions", "reference", "id"})
        if unknown:
            raise ValueError(f"unknown group key(s) {unknown}; known: prompt, completions, reference, id")
        completions = group["completions"]
        if isinstance(completions, str):
            raise ValueError("a group's 'completions' is a list of strings, not one string")
        wire = request.groups.add(id=str(group.get("id", "")), completions=list(completions))
        prompt = group["prompt"]
        if isinstance(prompt, str):
            wire.text = prompt
        else:
            wire.chat.messages.extend(reward_pb2.ChatMessage(role=m["role"], content=m["content"]) for m in prompt)
        if group.get("reference") is not None:
            wire.reference = group["reference"]
    return request
