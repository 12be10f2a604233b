"""Turns a ScoreRequest into judge inputs, checking every field.

Request-wide problems (no items, unknown rubric, bad weights or sampling
options) raise RequestError and fail the call with INVALID_ARGUMENT. A problem
with one item becomes that item's ItemFailure; the rest are scored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from geval_client.pb import reward_pb2

from .prompts import JudgeInput, render_chat
from .scorers.base import ItemFailure, Mode, Sampling, ScoreOptions

CHAT_ROLES = ("system", "user", "assistant")
MAX_SAMPLES = 64
MAX_TEMPERATURE = 2.0
ECHO_CHARS = 64  # a caller's string quoted in an error is cut to this: errors travel in gRPC metadata


@dataclass(frozen=True)
class Limits:
    """Per-request bounds; each error names the limit and the flag that sets it."""

    max_items: int = 4096
    max_field_chars: int = 200_000


class RequestError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class ValidRequest:
    items: list[JudgeInput | ItemFailure]
    ids: list[str]
    selection: list[tuple[str, float]]
    options: ScoreOptions


def validate(
    request: reward_pb2.ScoreRequest,
    needs_reference: Mapping[str, bool],
    default_rubric: str,
    limits: Limits = Limits(),
) -> ValidRequest:
    """needs_reference: every rubric (or scorer) served, and whether it needs the item's reference."""
    if not request.items:
        raise RequestError("items", "the batch is empty; send at least one item")
    if len(request.items) > limits.max_items:
        raise RequestError(
            "items",
            f"{len(request.items)} items exceed the limit of {limits.max_items} per request "
            "(--max-items-per-request); split the batch",
        )
    selection = _selection(request, needs_reference, default_rubric)
    options = _options(request)
    referenced = [name for name, _ in selection if needs_reference[name]]
    items = [_item(i, item, referenced, limits) for i, item in enumerate(request.items)]
    ids = [item.id or str(i) for i, item in enumerate(request.items)]
    return ValidRequest(items, ids, selection, options)


def _selection(
    request: reward_pb2.ScoreRequest, rubrics: Mapping[str, bool], default_rubric: str
) -> list[tuple[str, float]]:
    if not request.rubrics:
        return [(default_rubric, 1.0)]
    selection: list[tuple[str, float]] = []
    for i, choice in enumerate(request.rubrics):
        if choice.name not in rubrics:
            raise RequestError(
                f"rubrics[{i}].name", f"unknown rubric {_echo(choice.name)}; served: {sorted(rubrics)}"
            )
        if any(choice.name == name for name, _ in selection):
            raise RequestError(f"rubrics[{i}].name", f"rubric {_echo(choice.name)} is named twice")
        weight = choice.weight if choice.HasField("weight") else 1.0
        if not math.isfinite(weight) or weight < 0:
            raise RequestError(f"rubrics[{i}].weight", f"must be finite and >= 0, got {weight}")
        selection.append((choice.name, weight))
    if not any(weight > 0 for _, weight in selection):
        raise RequestError("rubrics", "the weights must not all be 0")
    return selection


_MODES = {
    reward_pb2.SCORING_MODE_UNSPECIFIED: Mode.LOGPROBS,
    reward_pb2.SCORING_MODE_LOGPROBS: Mode.LOGPROBS,
    reward_pb2.SCORING_MODE_SAMPLING: Mode.SAMPLING,
}


def _options(request: reward_pb2.ScoreRequest) -> ScoreOptions:
    if request.mode not in _MODES:
        raise RequestError("mode", f"unknown scoring mode {request.mode}; known: {sorted(_MODES)}")
    mode = _MODES[request.mode]
    if mode is not Mode.SAMPLING:
        return ScoreOptions(mode)
    options = request.sampling
    n = options.n or Sampling.n
    if n > MAX_SAMPLES:
        raise RequestError("sampling.n", f"must be at most {MAX_SAMPLES}, got {n}")
    temperature = options.temperature if options.HasField("temperature") else Sampling.temperature
    if not math.isfinite(temperature) or not 0 < temperature <= MAX_TEMPERATURE:
        raise RequestError(
            "sampling.temperature", f"must be in (0, {MAX_TEMPERATURE}], got {temperature}"
        )
    return ScoreOptions(mode, Sampling(n=n, temperature=temperature))


def _echo(text: str) -> str:
    """A caller's string as quoted in an error, cut short."""
    if len(text) <= ECHO_CHARS:
        return repr(text)
    return f"{text[:ECHO_CHARS]!r}... ({len(text)} characters)"


def _check_length(text: str, field: str, limits: Limits) -> None:
    if len(text) > limits.max_field_chars:
        raise ItemFailure(
            "INVALID_ARGUMENT",
            f"{len(text)} characters exceed the limit of {limits.max_field_chars} (--max-field-chars)",
            field,
        )


def _item(i: int, item: reward_pb2.Item, needs_reference: list[str], limits: Limits) -> JudgeInput | ItemFailure:
    try:
        _check_length(item.text, f"items[{i}].text", limits)
        for j, message in enumerate(item.chat.messages):
            _check_length(message.content, f"items[{i}].chat.messages[{j}].content", limits)
        _check_length(item.completion, f"items[{i}].completion", limits)
        _check_length(item.reference, f"items[{i}].reference", limits)
        prompt = _prompt_text(i, item)
        if not item.completion.strip():
            raise ItemFailure("INVALID_ARGUMENT", "must not be empty", f"items[{i}].completion")
        reference = item.reference if item.HasField("reference") else None
        if needs_reference and not (reference or "").strip():
            raise ItemFailure(
                "INVALID_ARGUMENT",
                f"is required by rubric(s) {needs_reference} and must not be empty",
                f"items[{i}].reference",
            )
        return JudgeInput(prompt=prompt, completion=item.completion, reference=reference)
    except ItemFailure as failure:
        return ItemFailure(failure.code, f"{failure.field}: {failure.message}", failure.field)


def _prompt_text(i: int, item: reward_pb2.Item) -> str:
    kind = item.WhichOneof("prompt")
    if kind == "text":
        if not item.text.strip():
            raise ItemFailure("INVALID_ARGUMENT", "must not be empty", f"items[{i}].text")
        return item.text
    if kind == "chat":
        messages = item.chat.messages
        if not messages:
            raise ItemFailure("INVALID_ARGUMENT", "must hold at least one message", f"items[{i}].chat.messages")
        for j, message in enumerate(messages):
            if message.role not in CHAT_ROLES:
                raise ItemFailure(
                    "INVALID_ARGUMENT",
                    f"must be one of {list(CHAT_ROLES)}, got {_echo(message.role)}",
                    f"items[{i}].chat.messages[{j}].role",
                )
        return render_chat([(m.role, m.content) for m in messages])
    raise ItemFailure("INVALID_ARGUMENT", "is required: set text or chat", f"items[{i}].prompt")
