"""Names of reward functions, which TRL logs under (`rewards/<name>/mean`,
`<name>/label_mass`): derived from the rubrics, and never shared by two rewards
that score differently, whose series would otherwise mix silently."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Hashable

from ...requests import Rubrics, rubric_selection

_live: weakref.WeakValueDictionary[str, object] = weakref.WeakValueDictionary()


def reward_name(rubrics: Rubrics, rubric_column: str | None = None) -> str:
    """`geval` for the server's default rubric, else `geval_` and the rubrics (an inline
    rubric by its name) as a weighted sum: {"a": 1, "b": 2} -> `geval_a+2*b`; equal
    weights are left out. With a rubric column, `geval_` and the column: each row
    brings its own rubric."""
    if rubric_column:
        return f"geval_{rubric_column}"
    chosen = [(s.name or getattr(s, s.WhichOneof("rubric")).name, s.weight if s.HasField("weight") else 1.0)
              for s in rubric_selection(rubrics)]  # a spec, rule or template sent inline: its own name
    if not chosen:
        return "geval"
    if len({weight for _, weight in chosen}) == 1:
        return "geval_" + "+".join(name for name, _ in chosen)
    return "geval_" + "+".join(name if weight == 1 else f"{weight:g}*{name}" for name, weight in chosen)


def claim_name(name: str, reward: object, scoring: Hashable) -> None:
    """Registers a live reward under its name; raises ValueError if a live reward
    that scores differently (another `scoring`) already has it."""
    if _other_holder(name, scoring) is not None:
        gc.collect()  # a reward dropped with its trainer may still wait in a reference cycle
    other = _other_holder(name, scoring)
    if other is not None:
        raise ValueError(
            f"two G-Eval rewards are both named {name!r}: {other} and {reward!r}; TRL would log them "
            "into the same series. pass name=... to tell them apart"
        )
    _live[name] = reward


def _other_holder(name: str, scoring: Hashable) -> str | None:
    """repr of the live reward holding the name with another scoring (no reference kept)."""
    holder = _live.get(name)
    if holder is None or holder._scoring() == scoring:  # type: ignore[attr-defined]
        return None
    return repr(holder)


def rubrics_key(rubrics: Rubrics) -> tuple:
    """The rubrics and their weights as a value to compare: part of a reward's scoring."""
    return tuple(
        (s.name or s.spec.SerializeToString(deterministic=True), s.weight if s.HasField("weight") else 1.0)
        for s in rubric_selection(rubrics)
    )
