"""A pairwise template's comparer (groupwise/comparer.py): a pairwise critic ranks a group.

Each pair of the schedule (groupwise/plan.py: all pairs, or neighbours in the canonical
cycle) is read in both orders through the template, i placed at `{a}` then at `{b}`; P(i
first wins) is the template's reward in that order (P(A), with a tie label counting half),
and both orders combine into the win matrix as the judge's own comparisons do
(groupwise/win_matrix.py), so P(i beats j) = 1 - P(j beats i) whatever order a group comes in.
Copies of one text are read once. Members reach it with claims removed; where the bound
gives a member a second text, the group is compared again with it and each member keeps the
lower reward, as a slot read is bounded (scorers/geval/groups/comparer.py).
The anchor and listwise schedules list no pairs: they are refused for it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from geval_server.defences.chain import Defences
from geval_server.groupwise.comparer import GroupCall
from geval_server.groupwise.plan import Group, Schedule, default_schedule, distinct, pairs
from geval_server.groupwise.results import GroupResult, Rationale, RubricGroupResult, combine
from geval_server.groupwise.win_matrix import OrderRead, PairVerdict, aggregate
from geval_server.scorers.base import ItemFailure, Scorer
from geval_server.scorers.geval.groups.comparer import lower_group_rewards
from geval_server.scorers.scoring_mode import ScoringMode
from geval_server.scorers.template.prompt import TemplateRequest

_PAIRED = (Schedule.ALL_PAIRS, Schedule.NEIGHBOURS)


class TemplateComparer:
    def check(self, scorer: Scorer, mode: ScoringMode) -> None:
        return None  # every mode reads a pair's order (TemplateScorer.read)

    async def compare(self, call: GroupCall, scorers: Sequence[tuple[Scorer, float]],
                      defences: Defences) -> list[GroupResult]:
        if call.schedule is not None and call.schedule not in _PAIRED:
            failure = ItemFailure("INVALID_ARGUMENT", f"a pairwise template compares pairs: schedule "
                                  f"{call.schedule.value} is not one of {[s.value for s in _PAIRED]}", "schedule")
            return [GroupResult(mode=call.mode, failure=group if isinstance(group, ItemFailure) else failure)
                    for group in call.groups]
        removed = [group if isinstance(group, ItemFailure) else [defences.removed(c) for c in group.completions]
                   for group in call.groups]
        first, second = [], []
        for group, texts in zip(call.groups, removed):
            if isinstance(group, ItemFailure):
                first.append(group)
                second.append(group)
                continue
            reads = [defences.reads(text, group.prompt, group.reference) for text, _ in texts]
            first.append(dataclasses.replace(group, completions=[r.first for r in reads]))
            bounded = [r.second for r in reads]
            second.append(dataclasses.replace(group, completions=[b or r.first for b, r in zip(bounded, reads)])
                          if any(b is not None for b in bounded) else ItemFailure("INTERNAL", "not read twice"))
        results = await _judge(call, first, scorers)
        if any(not isinstance(group, ItemFailure) for group in second):
            for result, read in zip(results, await _judge(call, second, scorers)):
                lower_group_rewards(result, read, [weight for _, weight in scorers])
        for result, texts in zip(results, removed):
            if result.failure is None:
                result.score_claims_removed = [count for _, count in texts]
        return results


async def _judge(call: GroupCall, groups: Sequence[Group | ItemFailure],
                 scorers: Sequence[tuple[Scorer, float]]) -> list[GroupResult]:
    """Every group on every scorer: each distinct prompt of the call read once."""
    results = [GroupResult(mode=call.mode) for _ in groups]
    plans = [[_plan(scorer, group, index, result, call) for scorer, _ in scorers]
             for index, (group, result) in enumerate(zip(groups, results))]
    wanted = {(s, request) for own in plans for s, plan in enumerate(own) if plan for _, _, request in plan[1]}
    if call.dry_run:
        for result in results:
            if result.failure is None:
                result.rewards = [0.0] * len(result.member_failures)
        return results
    keys = list(wanted)
    answers = await asyncio.gather(*(scorers[s][0].read(request, call.mode) for s, request in keys),
                                   return_exceptions=True)
    read = dict(zip(keys, answers))
    for result, own in zip(results, plans):
        if result.failure is not None:
            continue
        for s, ((scorer, _), plan) in enumerate(zip(scorers, own)):
            result.per_rubric.append(_outcome(scorer, s, plan, read, result, call))
        combine(result, [weight for _, weight in scorers])
    return results


def _plan(scorer: Scorer, group: Group | ItemFailure, index: int, result: GroupResult, call: GroupCall):
    """(copies by representative, [(i, j, request)] both orders of every pair) for one scorer,
    the member that cannot be read failed alone; None for a group that failed as a whole."""
    if isinstance(group, ItemFailure):
        result.failure = group
        return None
    size = len(group.completions)
    if not result.member_failures:
        result.member_failures = [None] * size
    values = {"prompt": group.prompt, "reference": group.reference or ""}
    members = [j for j in range(size) if result.member_failures[j] is None]
    copies = distinct(group.completions, members)
    schedule = call.schedule or default_schedule(len(copies))
    result.schedule = schedule
    reads = []
    for i, j in pairs(group.completions, list(copies), schedule, call.neighbours):
        for first, second in ((i, j), (j, i)):
            try:
                request = scorer.build({**values, "a": group.completions[first], "b": group.completions[second]},
                                       f"groups[{index}]")
            except ItemFailure as failure:
                result.member_failures[first] = result.member_failures[first] or ItemFailure(
                    failure.code, failure.message, f"groups[{index}].completions[{first}]")
                continue
            reads.append((first, second, request))
    result.alone = len(copies) < 2
    result.engine_reads += len({request for _, _, request in reads})
    result.prompt_tokens += sum(len(request) for request in {request for _, _, request in reads})
    return copies, reads


def _outcome(scorer: Scorer, s: int, plan, read: dict, result: GroupResult, call: GroupCall) -> RubricGroupResult:
    copies, reads = plan
    orders: dict[tuple[int, int], OrderRead] = {}
    rationales = []
    for first, second, request in reads:
        answer = read[(s, request)]
        if isinstance(answer, BaseException):
            failure = answer if isinstance(answer, ItemFailure) else ItemFailure(
                "INTERNAL", f"template {scorer.name!r}: the read failed: {type(answer).__name__}: {answer}")
            for member in (first, second):
                result.member_failures[member] = result.member_failures[member] or failure
            continue
        orders[(first, second)] = OrderRead(answer.estimate.reward, answer.estimate.label_mass)
        if answer.rationale:
            rationales.append(Rationale((first, second), answer.rationale))
    verdicts = {(i, j): PairVerdict(orders[(i, j)], orders[(j, i)]) for (i, j) in orders
                if (j, i) in orders and _before(i, j, reads) and result.member_failures[i] is None
                and result.member_failures[j] is None}
    kept = {rep: same for rep, same in copies.items() if result.member_failures[rep] is None}
    outcome = aggregate(len(result.member_failures), verdicts, call.aggregation, kept)
    return RubricGroupResult(scorer.name, scorer.content_hash, outcome, rationales)


def _before(i: int, j: int, reads: Sequence[tuple[int, int, TemplateRequest]]) -> bool:
    """Whether (i, j) is the pair's forward order, i placed first in the schedule's listing."""
    return next(first for first, second, _ in reads if {first, second} == {i, j}) == i
