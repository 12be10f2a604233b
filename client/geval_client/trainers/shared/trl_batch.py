"""Turns one TRL reward call (prompts, completions, dataset columns) into the
items of one Score request, and the results back into one reward per completion.

TRL passes prompts and completions either as strings (standard format) or as
chat messages (conversational format: completions are
`[{"role": "assistant", "content": ...}]`). When a reference column is named,
each distinct (prompt, reference) pair is also scored as if it were a
completion, in the same request, so the judge's preference for the policy's
text over the human's can be measured. A rubric column gives each row its own
rubric (row_rubrics.py), carried on its items.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...pb import reward_pb2
from ...requests import make_item
from ...types import ItemResult
from .row_rubrics import column_row, row_rubrics
from .trainer_text import completion_text, judge_prompt


@dataclass(frozen=True)
class RewardBatch:
    items: list[reward_pb2.Item]  # one per completion, then one per distinct reference
    completions: int
    reference_items: list[int | None]  # per completion: index of its reference's item, if scored
    lengths: list[int]  # per completion: tokens when TRL gave ids, else characters
    groups: list[Hashable]  # per completion: its dataset row (prompt, source, reference, rubric), i.e. its group
    rubric_origins: list[str | None]  # per completion: where its own rubric came from, named in errors


def build_batch(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    completion_ids: Sequence[Sequence[int]] | None,
    columns: Mapping[str, Any],
    source_column: str | None = None,
    reference_column: str | None = None,
    score_references: bool = True,
    rubric_column: str | None = None,
) -> RewardBatch:
    """columns: TRL's other keyword arguments (one list per dataset column)."""
    if len(prompts) != len(completions):
        raise ValueError(f"got {len(prompts)} prompts but {len(completions)} completions")
    sources = dataset_column(columns, source_column, len(prompts)) if source_column else prompts
    references = [None] * len(prompts)
    if reference_column:
        column = dataset_column(columns, reference_column, len(prompts))
        references = [_reference(value, i, reference_column) for i, value in enumerate(column)]
    own_rubrics: list[list[reward_pb2.RubricSelection]] = [[] for _ in prompts]
    rubric_origins: list[str | None] = [None] * len(prompts)
    if rubric_column:
        column = dataset_column(columns, rubric_column, len(prompts))
        rubric_origins = [column_row(rubric_column, i) for i in range(len(prompts))]
        own_rubrics = [row_rubrics(value, origin) for value, origin in zip(column, rubric_origins)]
    rubric_keys = [tuple(s.SerializeToString(deterministic=True) for s in own) for own in own_rubrics]
    items = []
    for i, (source, completion, reference, own) in enumerate(zip(sources, completions, references, own_rubrics)):
        items.append(make_item(judge_prompt(source), completion_text(completion), reference, str(i)))
        items[-1].rubrics.extend(own)
    reference_items: list[int | None] = [None] * len(items)
    if reference_column and score_references:
        seen: dict[tuple, int] = {}
        for i, (source, reference) in enumerate(zip(sources, references)):
            if reference is None or not reference.strip():
                continue
            prompt = judge_prompt(source)
            key = (_prompt_key(prompt), reference, rubric_keys[i])
            if key not in seen:  # a reference is scored with its row's rubric, as its completions are
                seen[key] = len(items)
                items.append(make_item(prompt, reference, item_id=f"reference-of-{i}"))
                items[-1].rubrics.extend(own_rubrics[i])
            reference_items[i] = seen[key]
    if completion_ids is not None:
        lengths = [len(ids) for ids in completion_ids]
    else:
        lengths = [len(item.completion) for item in items[: len(prompts)]]
    groups = [
        (_prompt_key(judge_prompt(prompt)), _prompt_key(judge_prompt(source)), reference, rubric_key)
        for prompt, source, reference, rubric_key in zip(prompts, sources, references, rubric_keys)
    ]
    return RewardBatch(items, len(prompts), reference_items, lengths, groups, rubric_origins)


def rewards_of(results: Sequence[ItemResult], completions: int) -> list[float | None]:
    """The server's reward per completion, None where it could not score one."""
    return [result.reward if result.ok else None for result in results[:completions]]


def dataset_column(columns: Mapping[str, Any], name: str, rows: int) -> Sequence[Any]:
    """The dataset column TRL passed as keyword `name`, one value per completion."""
    if name not in columns:
        available = sorted(k for k in columns if k not in ("trainer_state", "log_extra", "log_metric", "environments"))
        raise ValueError(f"column {name!r} is not in the dataset; columns passed by the trainer: {available}")
    values = columns[name]
    if len(values) != rows:
        raise ValueError(f"column {name!r} has {len(values)} values for {rows} completions")
    return values


def _reference(value: Any, row: int, column: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"column {column!r} row {row}: a reference must be a string, got {type(value).__name__}")


def _prompt_key(prompt: str | list[dict[str, str]]) -> str | tuple:
    if isinstance(prompt, str):
        return prompt
    return tuple((m["role"], m["content"]) for m in prompt)
