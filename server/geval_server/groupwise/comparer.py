"""How a scorer is compared within groups (ScoreGroups), whatever its kind: each scorer
names its comparer (Scorer.comparer); the judge hands each comparer its scorers of the
call and merges what they answer, each member's reward the weighted mean over all of them.
A kind brings its own comparer (the judge's comparison prompts, a reward model's
Bradley-Terry reads) or takes the pointwise one here, which scores each member alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from geval_server.defences.chain import Defences
from geval_server.groupwise.plan import Group, Schedule
from geval_server.groupwise.results import GroupResult, RubricGroupResult, combine
from geval_server.groupwise.win_matrix import Aggregation, GroupOutcome
from geval_server.scorers.base import ItemFailure, JudgeInput, Scorer
from geval_server.scorers.scoring_mode import ScoringMode


@dataclass(frozen=True)
class GroupCall:
    """A checked ScoreGroups call, as every comparer reads it."""

    groups: list[Group | ItemFailure]  # a group that failed validation as a whole
    schedule: Schedule | None  # None: all pairs up to 8 members, neighbours beyond
    neighbours: int
    aggregation: Aggregation
    mode: ScoringMode
    dry_run: bool  # plan and count the reads, read nothing


class Comparer(Protocol):
    def check(self, scorer: Scorer, mode: ScoringMode) -> None:
        """Raises Unservable (scorers/base.py) where `scorer` cannot be compared in `mode`."""

    async def compare(self, call: GroupCall, scorers: Sequence[tuple[Scorer, float]],
                      defences: Defences) -> list[GroupResult]:
        """One result per group of the call, on these scorers (weights as given): per member
        its reward, per scorer a RubricGroupResult."""


def merge(results: Sequence[Sequence[GroupResult]], weights: Sequence[Sequence[float]]) -> list[GroupResult]:
    """Several comparers' results on the same groups as one: the per-rubric results side by
    side (in the order given), a member failed by any fails, each member's reward the weighted
    mean over every rubric (weights: each comparer's scorers', in the same order)."""
    merged = list(results[0])
    flat = [w for own in weights for w in own]
    for other in results[1:]:
        for result, theirs in zip(merged, other):
            if result.failure is not None:
                continue
            result.per_rubric += theirs.per_rubric
            result.member_failures = [mine or their for mine, their in zip(result.member_failures,
                                                                           theirs.member_failures)]
            result.score_claims_removed = [max(a, b) for a, b in zip(result.score_claims_removed,
                                                                     theirs.score_claims_removed)]
            result.engine_reads += theirs.engine_reads
            result.prompt_tokens += theirs.prompt_tokens
            result.generated_tokens += theirs.generated_tokens
            result.alone = result.alone and theirs.alone
    if len(results) > 1:
        for result in merged:
            if result.failure is None and len(result.per_rubric) == len(flat):  # a dry run reads none
                combine(result, flat)
    return merged


class PointwiseComparer:
    """A scorer whose reward needs no peer (a rule): each member scored alone, as Score
    scores an item, its reward kept as it is; no pair is compared, so the win matrix is empty."""

    def check(self, scorer: Scorer, mode: ScoringMode) -> None:
        return None

    async def compare(self, call: GroupCall, scorers: Sequence[tuple[Scorer, float]],
                      defences: Defences) -> list[GroupResult]:
        results = [GroupResult(mode=call.mode) for _ in call.groups]
        requests: list[list[list]] = []  # [group][scorer][member]: a request, or None where it failed
        for index, (group, result) in enumerate(zip(call.groups, results)):
            if isinstance(group, ItemFailure):
                result.failure = group
                requests.append([])
                continue
            size = len(group.completions)
            result.member_failures = [None] * size
            result.score_claims_removed = [0] * size
            result.alone = True
            requests.append([[self._request(scorer, group, index, j, result) for j in range(size)]
                             for scorer, _ in scorers])
        if call.dry_run:
            for result in results:
                result.rewards = [0.0] * len(result.member_failures)
            return results
        for s, (scorer, _) in enumerate(scorers):
            wanted = list(dict.fromkeys(r for own in requests if own for r in own[s] if r is not None))
            read = dict(zip(wanted, await scorer.score(wanted, call.mode))) if wanted else {}
            for result, own in zip(results, requests):
                if result.failure is None:
                    result.per_rubric.append(RubricGroupResult(scorer.name, scorer.content_hash,
                                                               _outcome(result, own[s], read, scorer.name)))
        for result in results:
            if result.failure is None:
                combine(result, [weight for _, weight in scorers])
        return results

    @staticmethod
    def _request(scorer: Scorer, group: Group, index: int, member: int, result: GroupResult):
        item = JudgeInput(group.prompt, group.completions[member], group.reference, group.chat, steps=group.steps)
        try:
            return scorer.request(item, f"groups[{index}]")
        except ItemFailure as failure:
            field = f"groups[{index}].completions[{member}]"
            result.member_failures[member] = result.member_failures[member] or ItemFailure(
                failure.code, failure.message, failure.field.replace(f"groups[{index}].completion", field))
            return None


def _outcome(result: GroupResult, requests: list, read: dict, name: str) -> GroupOutcome:
    """Each member's own reward on one scorer; a failed read fails its member."""
    rewards = []
    for j, request in enumerate(requests):
        score = read.get(request) if request is not None else None
        if isinstance(score, BaseException):
            failure = score if isinstance(score, ItemFailure) else ItemFailure(
                "INTERNAL", f"rubric {name!r}: scoring failed: {type(score).__name__}: {score}")
            result.member_failures[j] = result.member_failures[j] or failure
        rewards.append(score.reward if score is not None and not isinstance(score, BaseException) else 0.0)
    size = len(requests)
    return GroupOutcome(rewards, [[None] * size for _ in range(size)], None, None, None, None)

