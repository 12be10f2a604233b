"""Which samples of a trainer's batch form one group for ScoreGroups.

A group is the completions of one prompt with one reference. Trainers do not always keep a
group's completions side by side (veRL's trainer.balance_batch reorders the batch to even out
tokens per rank; OpenRLHF's --use_dynamic_batch regroups micro-batches by length), so groups
are found by key, wherever their members stand, and a group's members stay in batch order.

Where the trainer's group size is known (TRL's num_generations, OpenRLHF's
n_samples_per_prompt), a prompt's members are cut into groups of that size, so two groups of
one prompt are judged apart, and members that make no whole group are told apart: part of a
group whose rest the trainer passed in another call (groups_of).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from .trainer_text import judge_prompt


def group_key(prompt: Any, reference: str | None) -> Hashable:
    """Two samples are one group when their prompt (text, or chat messages as the judge
    reads them) and their reference are equal."""
    return repr(judge_prompt(prompt)), reference


def groups_by_key(keys: Sequence[Hashable]) -> list[list[int]]:
    """The indices of each distinct key, groups in order of first appearance, members in batch order.

    Example: groups_by_key(["a", "b", "a", "b"]) -> [[0, 2], [1, 3]]"""
    groups: dict[Hashable, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def groups_of(keys: Sequence[Hashable], size: int) -> tuple[list[list[int]], list[list[int]]]:
    """Each key's members, in batch order, cut into groups of `size`; and the members of every key
    that holds no multiple of `size` (part of a group: its rest is elsewhere), which make no group.

    Example: groups_of(["a", "b", "a", "b", "c"], 2) -> ([[0, 2], [1, 3]], [[4]])"""
    if size < 1:
        raise ValueError(f"group size must be at least 1, got {size}")
    groups: list[list[int]] = []
    parts: list[list[int]] = []
    for members in groups_by_key(keys):
        if len(members) % size:
            parts.append(members)
        else:
            groups.extend(members[start:start + size] for start in range(0, len(members), size))
    return groups, parts


def nobody_to_compare(groups: Sequence[Sequence[int]], schedule: str | None) -> bool:
    """True when no sample of a non-empty call has a peer, so every reward would be the server's
    0.5 for a completion compared with nobody. The anchor schedule compares each completion with
    the reference instead of its peers, so a group of one is judged there."""
    return schedule != "anchor" and bool(groups) and all(len(group) == 1 for group in groups)
