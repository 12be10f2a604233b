"""Builds ScoreRequest protos from plain Python values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .pb import reward_pb2

Prompt = str | Sequence[Mapping[str, str]]
Rubrics = str | Sequence[str] | Mapping[str, float] | None


def make_item(
    prompt: Prompt, completion: str, reference: str | None = None, item_id: str = ""
) -> reward_pb2.Item:
    """prompt: plain text, or chat messages as dicts with "role" and "content"."""
    item = reward_pb2.Item(id=item_id, completion=completion)
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
    if isinstance(value, reward_pb2.Item):
        return value
    return make_item(
        value["prompt"], value["completion"], value.get("reference"), str(value.get("id", ""))
    )


def rubric_selection(rubrics: Rubrics) -> list[reward_pb2.RubricSelection]:
    """A name, a list of names (weight 1 each), or a {name: weight} mapping."""
    if rubrics is None:
        return []
    if isinstance(rubrics, str):
        return [reward_pb2.RubricSelection(name=rubrics)]
    if isinstance(rubrics, Mapping):
        return [reward_pb2.RubricSelection(name=n, weight=w) for n, w in rubrics.items()]
    return [reward_pb2.RubricSelection(name=n) for n in rubrics]


def score_request(
    items: Sequence[Any],
    rubrics: Rubrics = None,
    sampling_n: int | None = None,
    temperature: float | None = None,
) -> reward_pb2.ScoreRequest:
    """Sampling mode is chosen by giving sampling_n; otherwise log-probabilities."""
    request = reward_pb2.ScoreRequest(
        items=[as_item(item) for item in items], rubrics=rubric_selection(rubrics)
    )
    if sampling_n is not None:
        request.mode = reward_pb2.SCORING_MODE_SAMPLING
        request.sampling.n = sampling_n
        if temperature is not None:
            request.sampling.temperature = temperature
    return request
