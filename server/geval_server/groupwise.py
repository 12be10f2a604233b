"""Judges a group (one prompt's completions) within itself: pairs chosen by a schedule
(group_plan.py), each pair read in both orders as a comparison prompt (comparison_prompt.py),
the exact probabilities of the verdicts `A` and `B` read at the verdict slot, and one
reward per completion (win_matrix.py). All reads of a call are in flight together, in
token order, so pairs that share the rubric, the input and Response A reach vLLM side by
side and its prefix cache computes that prefix once.

Completions are judged with score claims blanked, as the pointwise read does. A member
that cannot be compared (empty, or too long for the judge's context next to a peer of its
own length) fails alone; the others are compared among themselves.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .comparison_prompt import VERDICTS, ComparisonPrompt
from .engine import JudgeEngine
from .expected_score import NoLabelMass
from .group_plan import Group, Schedule, default_schedule, pairs
from .rubrics import Rubric
from .score_slot import LabelVocabulary
from .scorers.base import ItemFailure
from .tokenization import Tokenization
from .win_matrix import Aggregation, GroupOutcome, OrderRead, PairVerdict, aggregate, anchor_outcome


@dataclass(frozen=True)
class GroupRequest:
    groups: list[Group | ItemFailure]  # a group that failed validation as a whole
    rubrics: list[tuple[Rubric, float]]  # prepared G-Eval rubrics and weights
    schedule: Schedule | None  # None: all pairs up to 8 members, neighbours beyond
    neighbours: int
    aggregation: Aggregation


@dataclass
class RubricGroupResult:
    rubric: str
    content_hash: str
    outcome: GroupOutcome


@dataclass
class GroupResult:
    rewards: list[float] = field(default_factory=list)
    member_failures: list[ItemFailure | None] = field(default_factory=list)
    per_rubric: list[RubricGroupResult] = field(default_factory=list)
    schedule: Schedule | None = None
    failure: ItemFailure | None = None
    score_claims_removed: list[int] = field(default_factory=list)


class Redactor(Protocol):
    """What blanks score claims and grader-addressed lines in a completion (judge.py)."""

    def redact(self, text: str) -> tuple[str, int]: ...


class GroupJudge:
    def __init__(self, engine: JudgeEngine, tokenization: Tokenization, vocabulary: LabelVocabulary) -> None:
        self._engine = engine
        self._tok = tokenization
        self._vocabulary = vocabulary
        self._prompts: dict[Rubric, ComparisonPrompt] = {}

    def prompt_for(self, rubric: Rubric) -> ComparisonPrompt:
        """The rubric's comparison prompt, built once (raises LabelTokenError for a judge that
        cannot spell the verdicts at the slot)."""
        if rubric not in self._prompts:
            self._prompts[rubric] = ComparisonPrompt(self._tok, self._vocabulary, rubric)
        return self._prompts[rubric]

    def content_hash(self, rubric: Rubric, judge_model: str) -> str:
        """What produced a comparison reward: the rubric, the judge and the comparison layout."""
        layout = self.prompt_for(rubric).fingerprint
        return hashlib.sha256(f"comparison:{rubric.content_hash(judge_model, layout)}".encode()).hexdigest()

    async def judge(self, request: GroupRequest, redactor: Redactor | None,
                    judge_model: str) -> list[GroupResult]:
        results = [GroupResult() for _ in request.groups]
        plans: list[_RubricPlan] = []
        for index, group in enumerate(request.groups):
            result = results[index]
            if isinstance(group, ItemFailure):
                result.failure = group
                continue
            texts, result.score_claims_removed = _blanked(group, redactor)
            result.schedule = request.schedule or default_schedule(len(texts))
            result.member_failures = [None] * len(texts)
            for rubric, _ in request.rubrics:
                plans.append(self._plan(index, group, texts, rubric, request.neighbours, result))
        wanted = sorted({(plan.rubric, ids) for plan in plans for ids in plan.prompts()}, key=lambda key: key[1])
        answers = await asyncio.gather(*(self._read(rubric, ids) for rubric, ids in wanted), return_exceptions=True)
        read = dict(zip(wanted, answers))
        for plan in plans:
            plan.result.per_rubric.append(
                RubricGroupResult(plan.rubric.name, self.content_hash(plan.rubric, judge_model),
                                  plan.outcome(read, request.aggregation)))
        for result in results:
            if result.failure is None:
                _combine(result, [weight for _, weight in request.rubrics])
        return results

    def _plan(self, index: int, group: Group, texts: list[str], rubric: Rubric, neighbours: int,
              result: GroupResult) -> _RubricPlan:
        prompt = self.prompt_for(rubric)
        shared = prompt.shared(group.prompt, group.reference)
        responses = [tuple(prompt.response(text)) for text in texts]
        limit = self._engine.max_model_len - 1
        fixed = prompt.fixed_tokens(shared)
        for i, (text, ids) in enumerate(zip(group.completions, responses)):
            where = f"groups[{index}].completions[{i}]"
            if result.member_failures[i] is not None:
                continue
            if not text.strip():
                result.member_failures[i] = ItemFailure("INVALID_ARGUMENT", f"{where}: must not be empty", where)
            elif fixed + 2 * len(ids) > limit:
                result.member_failures[i] = ItemFailure(
                    "INVALID_ARGUMENT",
                    f"{where}: a comparison of this completion with one of its length is {fixed + 2 * len(ids)} "
                    f"tokens, over the judge's limit of {limit} (max_model_len {self._engine.max_model_len})", where)
        members = [i for i, failure in enumerate(result.member_failures) if failure is None]
        plan = _RubricPlan(rubric, result, len(texts), anchored=result.schedule is Schedule.ANCHOR)
        if plan.anchored:
            anchor = tuple(prompt.response(group.anchor or ""))
            for i in members:
                if fixed + len(anchor) + len(responses[i]) > limit:
                    where = f"groups[{index}].completions[{i}]"
                    result.member_failures[i] = ItemFailure(
                        "INVALID_ARGUMENT", f"{where}: this completion and the anchor do not fit the judge's "
                        f"context of {self._engine.max_model_len} tokens", where)
                    continue
                plan.pairs[i] = (prompt.pair(shared, responses[i], anchor), prompt.pair(shared, anchor, responses[i]))
        else:
            for i, j in pairs(texts, members, result.schedule, neighbours):
                plan.pairs[(i, j)] = (prompt.pair(shared, responses[i], responses[j]),
                                      prompt.pair(shared, responses[j], responses[i]))
        return plan

    async def _read(self, rubric: Rubric, ids: tuple[int, ...]) -> OrderRead:
        """P(A) over the two verdicts at the slot, and their mass."""
        (read,) = self.prompt_for(rubric).slot.plan.reads
        answer = await self._engine.token_logprobs(list(ids), list(read.token_ids))
        probability = self.prompt_for(rubric).slot.plan.label_probabilities([answer])
        first, second = (probability[verdict] for verdict in VERDICTS)
        mass = first + second
        if not mass > 0.0 or not math.isfinite(mass):
            raise NoLabelMass("the judge put no probability on either verdict")
        return OrderRead(first / mass, min(1.0, mass))


@dataclass
class _RubricPlan:
    """One rubric's reads for one group: per pair (or per member against the anchor) the
    prompt ids of both orders."""

    rubric: Rubric
    result: GroupResult
    size: int
    anchored: bool
    pairs: dict = field(default_factory=dict)

    def prompts(self) -> list[tuple[int, ...]]:
        return [tuple(ids) for both in self.pairs.values() for ids in both]

    def outcome(self, read: dict, aggregation: Aggregation) -> GroupOutcome:
        verdicts = {}
        for key, (forward, backward) in self.pairs.items():
            orders = [read[(self.rubric, tuple(forward))], read[(self.rubric, tuple(backward))]]
            failed = next((o for o in orders if isinstance(o, BaseException)), None)
            if failed is not None:  # a failed read: the pair is left out, its members may still be compared
                _fail_members(self.result, key, failed, self.rubric.name)
                continue
            verdicts[key] = PairVerdict(*orders)
        if self.anchored:
            return anchor_outcome(self.size, verdicts)
        return aggregate(self.size, verdicts, aggregation)


def _fail_members(result: GroupResult, key, error: BaseException, rubric: str) -> None:
    members = key if isinstance(key, tuple) else (key,)
    for i in members:
        if result.member_failures[i] is None:
            result.member_failures[i] = ItemFailure("INTERNAL", f"rubric {rubric!r}: a comparison read failed: "
                                                    f"{type(error).__name__}: {error}")


def _blanked(group: Group, redactor: Redactor | None) -> tuple[list[str], list[int]]:
    if redactor is None:
        return list(group.completions), [0] * len(group.completions)
    blanked = [redactor.redact(text) for text in group.completions]
    return [text for text, _ in blanked], [count for _, count in blanked]


def _combine(result: GroupResult, weights: Sequence[float]) -> None:
    """Each member's reward: the weighted mean over rubrics of its group reward."""
    total = sum(weights)
    size = len(result.member_failures)
    result.rewards = [
        0.0 if result.member_failures[i] is not None
        else sum(w * r.outcome.rewards[i] for w, r in zip(weights, result.per_rubric)) / total
        for i in range(size)
    ]
