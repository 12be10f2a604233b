"""A completion as reasoning steps, and the steps' scores as one reward.

Steps are what a process reward is given per: by default the completion's paragraphs (split
on blank lines, as math solutions are written and as Qwen2.5-Math-PRM's own usage joins its
steps), or the pieces between a caller's delimiter, or the steps the caller sends (Item.steps).
Each step keeps where it lies in the completion ([start, end) in code points), so a trainer
can put a step's score on the tokens that wrote it.

The reductions are the usual ones for a PRM's step scores: `min` (a solution is as good as its
worst step: the default, as in Lightman et al. 2023 and Qwen2.5-Math-PRM's evaluation), `mean`,
`last` (the final step's verdict) and `product` (every step right, if their errors are
independent).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from geval_server.scorers.base import ItemFailure, StepOptions

BLANK_LINES = re.compile(r"\n[^\S\n]*\n")  # a line break, spaces or tabs, a line break


@dataclass(frozen=True)
class Step:
    text: str  # stripped of surrounding whitespace
    start: int  # where the text lies in the completion: completion[start:end] == text
    end: int


def split_steps(completion: str, options: StepOptions | None, where: str) -> tuple[Step, ...]:
    """The completion's steps; ItemFailure naming the field where there are none, or where an
    item's own step is not in its completion (in order)."""
    options = options or StepOptions()
    if options.steps is not None:
        return _located(completion, options.steps, where)
    if options.delimiter is None:
        bounds = [(m.start(), m.end()) for m in BLANK_LINES.finditer(completion)]
    else:
        bounds = [(m.start(), m.end()) for m in re.finditer(re.escape(options.delimiter), completion)]
    steps, position = [], 0
    for start, end in [*bounds, (len(completion), len(completion))]:
        step = _stripped(completion, position, start)
        if step is not None:
            steps.append(step)
        position = end
    if not steps:
        raise ItemFailure("INVALID_ARGUMENT", "has no step: only whitespace and delimiters", f"{where}.completion")
    return tuple(steps)


def _stripped(text: str, start: int, end: int) -> Step | None:
    piece = text[start:end]
    body = piece.strip()
    if not body:
        return None
    begin = start + (len(piece) - len(piece.lstrip()))
    return Step(body, begin, begin + len(body))


def _located(completion: str, given: Sequence[str], where: str) -> tuple[Step, ...]:
    steps, position = [], 0
    for k, text in enumerate(given):
        body = text.strip()
        found = completion.find(body, position)
        if found < 0:
            raise ItemFailure("INVALID_ARGUMENT", "is not in the completion after the step before it",
                              f"{where}.steps[{k}]")
        steps.append(Step(body, found, found + len(body)))
        position = found + len(body)
    return tuple(steps)


def reduce_steps(scores: Sequence[float], reduction: str) -> float:
    """The reward of the step scores (each in [0, 1]) by the reduction's name (base.STEP_REDUCTIONS)."""
    if reduction == "min":
        return min(scores)
    if reduction == "mean":
        return math.fsum(scores) / len(scores)
    if reduction == "last":
        return scores[-1]
    if reduction == "product":
        return math.prod(scores)
    raise ValueError(f"unknown reduction {reduction!r}")
