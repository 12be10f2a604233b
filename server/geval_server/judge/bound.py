"""Step 3, the bound: where the defences read a completion twice, each slot reader keeps the
lower of its two rewards, so a claim can only lower it. Items here, group members (the
comparisons read a second time) below."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from geval_server.defences.chain import Defences, SlotReads
from geval_server.groupwise.judge import GroupRequest, GroupResult
from geval_server.groupwise.plan import Group
from geval_server.judge.outcomes import ItemScore
from geval_server.judge.reads import Read
from geval_server.scorers.base import ItemFailure, Score


@dataclass(frozen=True)
class BoundScores:
    """An item's scores per selection position (those read without failure), in order."""

    kept: list[ItemScore]  # the lower of the two reads where there were two
    plain: list[ItemScore]  # the first reads alone
    lowered: bool  # a second read was lower and was kept
    gaps: dict[str, float]  # per slot reader: plain - kept reward (>= 0)


def bound(reads: Sequence[tuple[Read, Score]]) -> BoundScores:
    plain = {read.position: ItemScore(read.scorer, score) for read, score in reads if not read.second}
    kept = dict(plain)
    lowered = False
    for read, score in reads:
        if read.second and read.position in kept and score.reward < kept[read.position].score.reward:
            kept[read.position] = ItemScore(read.scorer, score)
            lowered = True
    gaps = {s.scorer.name: s.score.reward - kept[p].score.reward for p, s in plain.items() if s.scorer.reads_score_slot}
    return BoundScores([kept[p] for p in sorted(kept)], [plain[p] for p in sorted(plain)], lowered, gaps)


def bounded_groups(request: GroupRequest, defences: Defences) -> GroupRequest | None:
    """The groups as the bounding second comparison reads them, for the groups where a member
    has a second read (defences.reads: its bounded text; the other members as first read);
    the others stand out of it as failed. None: no group has one.
    Claims tied to a letter (`Response A is better`) cancel in the two orders already; a
    claim without one (`Coherence: 5`) would lift its member in both, so it gets the bound."""
    groups: list[Group | ItemFailure] = []
    for group in request.groups:
        bounded = [] if isinstance(group, ItemFailure) else [
            defences.reads(defences.removed(c)[0], group.prompt, group.reference).second for c in group.completions]
        if any(text is not None for text in bounded):
            completions = [completion if text is None else text for text, completion in zip(bounded, group.completions)]
            anchor = group.anchor and _bounded_text(defences.reads(group.anchor, group.prompt, group.reference))
            groups.append(dataclasses.replace(group, completions=completions, anchor=anchor))
        else:
            groups.append(ItemFailure("INTERNAL", "not read a second time"))
    if all(isinstance(group, ItemFailure) for group in groups):
        return None
    return dataclasses.replace(request, groups=groups)


def _bounded_text(reads: SlotReads) -> str:
    """The bounded text among a text's reads: the second where it has one, else its only read."""
    return reads.first if reads.second is None else reads.second


def lower_group_rewards(result: GroupResult, bounded: GroupResult, weights: Sequence[float]) -> None:
    """Each member's reward per rubric is the lower of its plain and bounded comparisons, so
    a claim can only lower it; the member's reward is recombined from them. A member the
    bounded comparison could not read keeps its plain reward (its failure is the plain one's)."""
    if result.failure is not None or bounded.failure is not None:
        return
    lowered = [False] * len(result.rewards)
    for plain, second in zip(result.per_rubric, bounded.per_rubric):
        for i, (a, b) in enumerate(zip(plain.outcome.rewards, second.outcome.rewards)):
            if result.member_failures[i] is None and bounded.member_failures[i] is None and b < a:
                plain.outcome.rewards[i] = b
                lowered[i] = True
    total = sum(weights)
    result.rewards = [sum(w * r.outcome.rewards[i] for w, r in zip(weights, result.per_rubric)) / total
                      if lowered[i] else reward for i, reward in enumerate(result.rewards)]
    result.engine_reads += bounded.engine_reads
    result.prompt_tokens += bounded.prompt_tokens
    result.generated_tokens += bounded.generated_tokens
