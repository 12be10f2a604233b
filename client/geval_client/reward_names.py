"""Names of reward functions, which TRL logs under (`rewards/<name>/mean`,
`<name>/label_mass`): derived from the rubrics, and never shared by two rewards
that score differently, whose series would otherwise mix silently."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Hashable, Mapping

from .requests import Rubrics

_live: weakref.WeakValueDictionary[str, object] = weakref.WeakValueDictionary()


def reward_name(rubrics: Rubrics) -> str:
    """`geval` for the server's default rubric, else `geval_` and the rubrics as a
    weighted sum: {"a": 1, "b": 2} -> `geval_a+2*b`; equal weights are left out."""
    if rubrics is None:
        return "geval"
    if isinstance(rubrics, str):
        return f"geval_{rubrics}"
    if not isinstance(rubrics, Mapping) or len(set(rubrics.values())) == 1:
        return "geval_" + "+".join(rubrics)
    return "geval_" + "+".join(name if weight == 1 else f"{weight:g}*{name}" for name, weight in rubrics.items())


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
