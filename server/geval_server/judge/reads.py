"""Step 1, plan the reads: per item, its completion through the defences and one engine
request per scorer of its selection, plus a second, bounding request per slot reader where
the defences read the completion twice."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from geval_server.defences.chain import Defences
from geval_server.judge.inputs import Selection
from geval_server.scorers.base import ItemFailure, JudgeInput, Scorer


@dataclass(frozen=True)
class Read:
    """One engine request of an item: its scorer's place in the item's selection, and
    whether it is the second read that bounds a slot reader's reward."""

    position: int
    second: bool
    scorer: Scorer
    request: Hashable

    @property
    def key(self) -> tuple[Scorer, Hashable]:
        """Identical requests of any items share this key, so they are scored once."""
        return self.scorer, self.request


@dataclass(frozen=True)
class ItemPlan:
    selection: Selection
    reads: list[Read] = field(default_factory=list)
    failure: ItemFailure | None = None  # the item failed before anything was read
    score_claims_removed: int = 0
    read_twice: bool = False


def plan_item(index: int, item: JudgeInput | ItemFailure, selection: Selection, defences: Defences) -> ItemPlan:
    """The item's reads: a scorer that reads no slot reads the completion as written, a slot
    reader reads it with score claims removed, as the bound's first text; each slot reader
    reads the bound's second text too where there is one (`Defences.reads`)."""
    if isinstance(item, ItemFailure):
        return ItemPlan(selection, failure=item)
    completion, removed = defences.removed(item.completion)
    slot_item = _reading(item, completion, lambda step: defences.removed(step)[0]) if removed else item
    first, second = _slot_items(slot_item, selection, defences)
    where = f"items[{index}]"
    try:
        reads = [Read(p, False, s, s.request(first if s.reads_score_slot else item, where))
                 for p, (s, _) in enumerate(selection)]
        if second is not None:
            reads += [Read(p, True, s, s.request(second, where))
                      for p, (s, _) in enumerate(selection) if s.reads_score_slot]
    except ItemFailure as failure:
        return ItemPlan(selection, failure=failure, score_claims_removed=removed, read_twice=second is not None)
    return ItemPlan(selection, reads, None, removed, second is not None)


def _slot_items(item: JudgeInput, selection: Selection, defences: Defences) -> tuple[JudgeInput, JudgeInput | None]:
    """The item as a score slot first reads it, and as the second read that bounds its
    reward (None: read once), when a scorer of the selection reads a slot."""
    if not any(s.reads_score_slot for s, _ in selection):
        return item, None
    reads = defences.reads(item.completion, item.prompt, item.reference)
    first = item if reads.first == item.completion else _reading(item, reads.first, defences.bounded)
    return first, None if reads.second is None else _reading(item, reads.second, defences.bounded)


def _reading(item: JudgeInput, text: str, rewrite: Callable[[str], str]) -> JudgeInput:
    """The item with `text`, the defences' rewrite of its completion, read instead; the steps the
    caller sent (process rewards) rewritten alike, so each is found in what is read."""
    options = item.steps
    if options is None or options.steps is None:
        return dataclasses.replace(item, completion=text)
    steps = dataclasses.replace(options, steps=tuple(rewrite(step) for step in options.steps))
    return dataclasses.replace(item, completion=text, steps=steps)
