"""The G-Eval rubrics' comparer (groupwise/comparer.py): their comparison prompts read by
the judge (judge.py), and bounded as a slot read is: where a member has a bounded text
(defences.reads), the group is compared a second time with it, and each member keeps the
lower of its two rewards per rubric, so a claim can only lower it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from geval_server.defences.chain import Defences, SlotReads
from geval_server.groupwise.comparer import GroupCall
from geval_server.groupwise.plan import Group
from geval_server.groupwise.results import GroupResult
from geval_server.scorers.base import ItemFailure, Scorer
from geval_server.scorers.geval.groups.judge import GroupJudge, GroupRequest
from geval_server.scorers.geval.groups.prompt import PAIR
from geval_server.scorers.scoring_mode import Reasoning, ScoringMode


class GEvalComparer:
    def __init__(self, groups: GroupJudge, judge_model: str) -> None:
        self.groups = groups
        self.judge_model = judge_model

    def check(self, scorer: Scorer, mode: ScoringMode) -> None:
        """The rubric's comparison prompt (and in reasoning mode its reasoning layout) is built
        once here; a judge that cannot read it raises LabelTokenError or RubricError."""
        prompt = self.groups.prompt_for(scorer.prepared.rubric)
        if isinstance(mode, Reasoning):
            prompt.reasoning(PAIR)

    async def compare(self, call: GroupCall, scorers: Sequence[tuple[Scorer, float]],
                      defences: Defences) -> list[GroupResult]:
        request = GroupRequest(call.groups, [(scorer.prepared.rubric, weight) for scorer, weight in scorers],
                               call.schedule, call.neighbours, call.aggregation, call.mode, call.dry_run)
        bounded = bounded_groups(request, defences)
        if bounded is None:
            return await self.groups.judge(request, defences, self.judge_model)
        plain, second = await asyncio.gather(self.groups.judge(request, defences, self.judge_model),
                                             self.groups.judge(bounded, defences, self.judge_model))
        for result, read in zip(plain, second):
            lower_group_rewards(result, read, [weight for _, weight in request.rubrics])
        return plain


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
