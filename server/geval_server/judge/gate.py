"""The gate: a rule checked before anything else reads an item (ScoreRequest.gate). An item
that fails it gets the caller's gate_reward and no scorer reads it, so the judge spends nothing
on an answer a rule already failed; an item that passes is scored exactly as without a gate.
In a group, the members that fail are left out of the comparisons, the others compared among
themselves, and the results widened back to the whole group."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from geval_server.groupwise.plan import Group
from geval_server.groupwise.results import GroupResult
from geval_server.judge.outcomes import ItemOutcome, ItemScore
from geval_server.judge.reads import ItemPlan
from geval_server.scorers.base import ItemFailure, JudgeInput, Scorer
from geval_server.scorers.scoring_mode import Logprobs


@dataclass(frozen=True)
class GateCheck:
    """One item's (or member's) check: passed, with the gate's score; or the check failed to run."""

    passed: bool
    score: ItemScore | None = None
    failure: ItemFailure | None = None


class Gate:
    def __init__(self, scorer: Scorer, reward: float) -> None:
        self.scorer, self.reward = scorer, reward

    async def check_items(self, items: Sequence[JudgeInput | ItemFailure]) -> list[GateCheck | None]:
        """Per item its check; None for an item that failed before (it keeps its own failure)."""
        inputs = {i: (item, f"items[{i}]") for i, item in enumerate(items) if not isinstance(item, ItemFailure)}
        checked = await self._check(list(inputs.values()))
        by_index = dict(zip(inputs, checked))
        return [by_index.get(i) for i in range(len(items))]

    async def check_groups(self, groups: Sequence[Group | ItemFailure], dry_run: bool) -> list[list[GateCheck] | None]:
        """Per group, each member's check (a dry run checks too: the gate decides what is read)."""
        inputs, shape = [], []
        for index, group in enumerate(groups):
            if isinstance(group, ItemFailure):
                shape.append(None)
                continue
            shape.append(len(group.completions))
            inputs += [(JudgeInput(group.prompt, completion, group.reference, group.chat), f"groups[{index}]")
                       for completion in group.completions]
        checked = iter(await self._check(inputs))
        return [None if size is None else [next(checked) for _ in range(size)] for size in shape]

    async def _check(self, inputs: Sequence[tuple[JudgeInput, str]]) -> list[GateCheck]:
        """Every input's request, the distinct ones scored in one batch."""
        requests: list = []
        for item, where in inputs:
            try:
                requests.append(self.scorer.request(item, where))
            except ItemFailure as failure:
                requests.append(failure)
        wanted = list(dict.fromkeys(r for r in requests if not isinstance(r, ItemFailure)))
        read = dict(zip(wanted, await self.scorer.score(wanted, Logprobs()))) if wanted else {}
        checks = []
        for request in requests:
            result = request if isinstance(request, ItemFailure) else read[request]
            if isinstance(result, ItemFailure):
                checks.append(GateCheck(False, failure=result))
            elif isinstance(result, BaseException):
                checks.append(GateCheck(False, failure=ItemFailure(
                    "INTERNAL", f"gate {self.scorer.name!r}: the check failed: {type(result).__name__}: {result}")))
            else:
                checks.append(GateCheck(result.reward >= 1.0, ItemScore(self.scorer, result)))
        return checks


def gated_outcome(plan: ItemPlan, check: GateCheck, gate: Gate) -> ItemOutcome:
    """An item the gate stopped: the caller's gate_reward, or the failure of its check."""
    if check.failure is not None:
        return ItemOutcome(failure=plan.failure or check.failure)
    return ItemOutcome(reward=gate.reward, plain_reward=gate.reward, gated=True)


def narrow_groups(groups: Sequence[Group | ItemFailure], checks: Sequence[list[GateCheck] | None]
                  ) -> list[Group | ItemFailure]:
    """Each group with only the members that passed; a group none passed stands out as failed."""
    narrowed: list[Group | ItemFailure] = []
    for group, own in zip(groups, checks):
        if isinstance(group, ItemFailure):
            narrowed.append(group)
            continue
        kept = [c for c, check in zip(group.completions, own) if check.passed]
        narrowed.append(dataclasses.replace(group, completions=kept) if kept
                        else ItemFailure("INTERNAL", "every member failed the gate"))
    return narrowed


def widen_groups(results: Sequence[GroupResult],
                 checks: Sequence[list[GateCheck] | None], gate: Gate) -> list[GroupResult]:
    """The narrowed groups' results back in each whole group's order: a member that failed the
    gate gets gate_reward (in every rubric's rewards too) and compared with nobody."""
    widened = []
    for result, own in zip(results, checks):
        if own is None:
            widened.append(result)
            continue
        kept = [j for j, check in enumerate(own) if check.passed]
        size = len(own)
        whole = GroupResult(mode=result.mode, schedule=result.schedule, engine_reads=result.engine_reads,
                            prompt_tokens=result.prompt_tokens, generated_tokens=result.generated_tokens,
                            alone=result.alone if kept else True)
        whole.rewards = [gate.reward] * size
        whole.member_failures = [check.failure for check in own]
        whole.score_claims_removed = [0] * size
        whole.gated = [not check.passed and check.failure is None for check in own]
        whole.gate_scores = [check.score for check in own]
        if kept:
            for k, j in enumerate(kept):
                whole.rewards[j] = result.rewards[k]
                whole.member_failures[j] = result.member_failures[k]
                whole.score_claims_removed[j] = result.score_claims_removed[k]
            whole.per_rubric = [dataclasses.replace(per, outcome=_widened(per.outcome, kept, size, gate.reward))
                                for per in result.per_rubric]
        widened.append(whole)
    return widened


def _widened(outcome, kept: list[int], size: int, reward: float):
    rewards = [reward] * size
    matrix: list[list[float | None]] = [[None] * size for _ in range(size)]
    for k, j in enumerate(kept):
        rewards[j] = outcome.rewards[k]
        for m, i in enumerate(kept):
            matrix[j][i] = outcome.win_matrix[k][m]
    return dataclasses.replace(outcome, rewards=rewards, win_matrix=matrix)
