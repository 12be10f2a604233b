"""Groups judged by a reward model (ScoreGroups with `reward-model`): each distinct
completion read once, P(i beats j) = sigmoid(r_i - r_j) (Bradley-Terry, exact), each
completion's reward its mean P of beating its peers; copies of one text tie at 0.5."""

from __future__ import annotations

from collections.abc import Sequence

from geval_server.defences.chain import Defences
from geval_server.groupwise.comparer import GroupCall
from geval_server.groupwise.plan import Group, Schedule
from geval_server.groupwise.results import GroupResult, RubricGroupResult, combine
from geval_server.groupwise.win_matrix import GroupOutcome
from geval_server.scorers.base import ItemFailure, JudgeInput, Scorer
from geval_server.scorers.reward_model.scorer import RewardModelScorer, sigmoid
from geval_server.scorers.scoring_mode import ScoringMode


class RewardModelComparer:
    """The reward model's comparer (groupwise/comparer.py): any mode, since a classifier
    is read the one way, and no defence, since it reads no score slot."""

    def check(self, scorer: Scorer, mode: ScoringMode) -> None:
        return None

    async def compare(self, call: GroupCall, scorers: Sequence[tuple[Scorer, float]],
                      defences: Defences) -> list[GroupResult]:
        return await judge_groups(call.groups, scorers, call.mode, call.dry_run)


async def judge_groups(groups: Sequence[Group | ItemFailure], scorers: Sequence[tuple[RewardModelScorer, float]],
                       mode: ScoringMode, dry_run: bool) -> list[GroupResult]:
    """Every group's completions on each reward-model scorer, all chats read in one batch per scorer."""
    results = [GroupResult(mode=mode) for _ in groups]
    chats: list[list[list[tuple[int, ...] | None]]] = [[] for _ in scorers]  # [scorer][group][member]
    for index, group in enumerate(groups):
        result = results[index]
        if isinstance(group, ItemFailure):
            result.failure = group
            for own in chats:
                own.append([])
            continue
        result.schedule = Schedule.ALL_PAIRS
        result.member_failures = [None] * len(group.completions)
        result.score_claims_removed = [0] * len(group.completions)
        for s, (scorer, _) in enumerate(scorers):
            members = []
            for j, completion in enumerate(group.completions):
                item = JudgeInput(group.prompt, completion, chat=group.chat)
                try:
                    members.append(scorer.request(item, f"groups[{index}]").chat)
                except ItemFailure as failure:
                    members.append(None)
                    field = f"groups[{index}].completions[{j}]"
                    result.member_failures[j] = result.member_failures[j] or ItemFailure(
                        failure.code, failure.message, field)
            chats[s].append(members)
        distinct = {ids for members in (c[index] for c in chats) for ids in members if ids is not None}
        result.engine_reads, result.prompt_tokens = len(distinct), sum(map(len, distinct))
    if dry_run:
        for result in results:
            result.rewards = [0.0] * len(result.member_failures)
        return results
    for (scorer, _), per_group in zip(scorers, chats):
        read = await scorer.raw_scores([ids for members in per_group for ids in members if ids is not None])
        for result, members in zip(results, per_group):
            if result.failure is None:
                result.per_rubric.append(RubricGroupResult(scorer.name, scorer.content_hash,
                                                           _outcome(result, members, read, scorer)))
    for result in results:
        if result.failure is None:
            combine(result, [weight for _, weight in scorers])
    return results


def _outcome(result: GroupResult, members: list[tuple[int, ...] | None], read: dict,
             scorer: RewardModelScorer) -> GroupOutcome:
    """The win matrix and rewards of one group on one scorer; a failed read fails its member."""
    raw: list[float | None] = []
    for j, ids in enumerate(members):
        heads = read.get(ids) if ids is not None else None
        if isinstance(heads, BaseException):
            result.member_failures[j] = result.member_failures[j] or ItemFailure(
                "INTERNAL", f"the reward model's read failed: {type(heads).__name__}: {heads}")
        raw.append(None if result.member_failures[j] is not None or heads is None
                   else heads[scorer.checkpoint.head])
    size = len(members)
    matrix: list[list[float | None]] = [[None] * size for _ in range(size)]
    for i in range(size):
        for j in range(size):
            if i != j and raw[i] is not None and raw[j] is not None:
                matrix[i][j] = sigmoid(raw[i] - raw[j])
    rewards = []
    for i in range(size):
        wins = [p for p in matrix[i] if p is not None]
        rewards.append(sum(wins) / len(wins) if wins else 0.5)
    distinct = {members[i] for i in range(size) if raw[i] is not None}
    result.alone = len(distinct) < 2 and any(r is not None for r in raw)
    return GroupOutcome(rewards, matrix, None, None, None, None)
