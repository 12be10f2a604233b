"""What a completion the server could not score is given as its reward.

The server names the field that made an item fail. A failure the completion
caused (empty, over the field limit, or the largest part of a judge prompt over
the judge's context) is the policy's doing: `on_error` decides what it gets.
    "min"      the lowest reward a rubric gives, 0.0: escaping the judge must not pay.
    <float>    that reward.
    "exclude"  no signal from this reward: the mean reward of the completions of the
               same prompt scored in the same call, so it adds nothing to the item's
               advantage and leaves its group's baseline where it was; None when none
               of them was scored (TRL then leaves the row, or the group, out).
Any other failure (the prompt or reference from the data, a judge error) says
nothing about the completion and is always excluded where the trainer can
exclude; where it needs a number for every sample (OpenRLHF, veRL) it raises.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from ...types import ItemResult

EXCLUDE, MIN = "exclude", "min"
MIN_REWARD = 0.0  # every rubric's reward lies in [0, 1]
OnError = str | float


def parse_on_error(on_error: OnError, *, can_exclude: bool = True) -> float | None:
    """The reward a completion-caused failure gets; None means exclude."""
    if on_error == EXCLUDE and can_exclude:
        return None
    if on_error == EXCLUDE:
        raise ValueError(
            "on_error='exclude' needs a trainer that can leave a sample out; this one needs a number "
            "for every sample: use on_error='min' or a float"
        )
    if on_error == MIN:
        return MIN_REWARD
    if isinstance(on_error, (int, float)) and not isinstance(on_error, bool) and math.isfinite(on_error):
        return float(on_error)
    raise ValueError(f"on_error must be 'exclude', 'min' or a finite number, got {on_error!r}")


def grouped_rewards(
    results: Sequence[ItemResult], groups: Sequence[Hashable], on_error: float | None
) -> list[float | None]:
    """One reward per result; groups[i] names the prompt of result i (its GRPO/RLOO group)."""
    scored = [result.reward if result.ok else None for result in results]
    peers: dict[Hashable, list[float]] = {}
    for group, reward in zip(groups, scored):
        if reward is not None:
            peers.setdefault(group, []).append(reward)
    rewards = list(scored)
    for i, result in enumerate(results):
        if result.ok:
            continue
        if on_error is not None and result.error.caused_by_completion:
            rewards[i] = on_error
        elif group_peers := peers.get(groups[i]):
            rewards[i] = math.fsum(group_peers) / len(group_peers)
    return rewards

