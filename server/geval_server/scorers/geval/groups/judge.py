"""Judges a group (one prompt's completions) within itself: pairs chosen by a schedule
(plan.py), each pair read in both orders as a comparison prompt (prompt.py),
or the whole group listed once per cyclic shift; the exact probabilities of the verdict
letters read at the verdict slot, and one reward per completion (win_matrix.py). All reads
of a call are in flight together, in token order, so prompts that share the rubric, the
input and Response A reach vLLM side by side and its prefix cache computes that prefix once.

Completions are judged with score claims removed, as the pointwise read does. A member
that cannot be compared (empty, or too long for the judge's context next to a peer of its
own length) fails alone; the others are compared among themselves. A list that still does
not fit the context, or a group larger than the letters the judge reads, fails the group.

Copies of one text (after score-claim removal) are judged once, through a representative
(plan.distinct), and each copy takes its reward: copies get identical rewards under every
schedule, and a group's reads depend on its distinct texts only.

Each verdict is read in the call's mode, as pointwise reads are: the exact letter
probabilities at the slot (log-probabilities); the judge's written comparison first, then
those probabilities after its text (reasoning: the same write-then-read as the pointwise
reasoning mode, its texts returned as rationales); or n sampled letters, their frequencies
(sampling, seeded by the prompt). A read is a function of its prompt alone (greedy writing,
seeded samples), and prompts are built in canonical order, so every invariance of the
plain read holds in each mode. A dry run plans the reads and counts them, reading nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from geval_server.defences.chain import Defences
from geval_server.defences.reader_text import is_blank
from geval_server.engine.protocol import EngineRequestError, JudgeEngine
from geval_server.engine.tokenization import Tokenization
from geval_server.groupwise.plan import Group, Schedule, cyclic_shifts, default_schedule, distinct, pairs
from geval_server.groupwise.results import ANCHOR, GroupResult, Rationale, RubricGroupResult, combine
from geval_server.groupwise.win_matrix import (
    Aggregation,
    GroupOutcome,
    ListRead,
    OrderRead,
    PairVerdict,
    aggregate,
    anchor_outcome,
    listwise_outcome,
)
from geval_server.scorers.base import ItemFailure
from geval_server.scorers.geval.expected_score import NoLabelMass
from geval_server.scorers.geval.groups.prompt import LETTERS, PAIR, ComparisonPrompt, GroupInput
from geval_server.scorers.geval.reasoning import write_then_read
from geval_server.scorers.geval.rubrics import Rubric
from geval_server.scorers.geval.slot import LabelTokenError, LabelVocabulary
from geval_server.scorers.scoring_mode import Logprobs, Reasoning, Sampling, ScoringMode


@dataclass(frozen=True)
class GroupRequest:
    groups: list[Group | ItemFailure]  # a group that failed validation as a whole
    rubrics: list[tuple[Rubric, float]]  # prepared G-Eval rubrics and weights
    schedule: Schedule | None  # None: all pairs up to 8 members, neighbours beyond
    neighbours: int
    aggregation: Aggregation
    mode: ScoringMode = Logprobs()
    dry_run: bool = False  # plan and count the reads, read nothing


@dataclass(frozen=True)
class Verdict:
    """One prompt's verdict: each listed letter's probability renormalized over the letters,
    their mass before renormalizing, and what the judge wrote first (reasoning mode)."""

    p_letters: tuple[float, ...]
    mass: float
    rationale: str = ""
    generated_tokens: int = 0


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

    def content_hash(self, rubric: Rubric, judge_model: str, listed: int = PAIR, reasoning: bool = False) -> str:
        """What produced a comparison reward: the rubric, the judge and the layout of a
        prompt listing `listed` responses (a pair's for the pair schedules), in reasoning
        mode with the instruction to write first and the verdict after the judge's text."""
        prompt = self.prompt_for(rubric)
        layout = prompt.layout(listed).fingerprint
        if reasoning:
            layout = f"{layout}:{prompt.reasoning(listed).fingerprint()}"
        return hashlib.sha256(f"comparison:{rubric.content_hash(judge_model, layout)}".encode()).hexdigest()

    async def judge(self, request: GroupRequest, defences: Defences,
                    judge_model: str) -> list[GroupResult]:
        results = [GroupResult(mode=request.mode) for _ in request.groups]
        reasoning = isinstance(request.mode, Reasoning)
        plans: list[_RubricPlan | _ListPlan] = []
        reads_of: dict[int, set] = {}  # per group: the reads it needs
        for index, group in enumerate(request.groups):
            result = results[index]
            if isinstance(group, ItemFailure):
                result.failure = group
                continue
            texts, result.score_claims_removed = _removed(group, defences)
            group = _anchor_as_read(group, defences)
            result.schedule = request.schedule or default_schedule(len(set(texts)))
            result.member_failures = [None] * len(texts)
            try:
                own = [self._plan(index, group, texts, rubric, request.neighbours, result, reasoning)
                       for rubric, _ in request.rubrics]
            except ItemFailure as failure:  # the group as a whole cannot be listed
                result.failure = failure
                continue
            plans += own
            own_reads = reads_of[index] = {(plan.rubric, *key) for plan in own for key in plan.prompts()}
            result.engine_reads, result.prompt_tokens = len(own_reads), sum(len(ids) for _, _, ids in own_reads)
            result.alone = not own_reads and any(failure is None for failure in result.member_failures)
        if request.dry_run:
            for index, own_reads in reads_of.items():
                results[index].rewards = [0.0] * len(results[index].member_failures)
                results[index].generated_tokens = sum(self._most_generated(request.mode, *key) for key in own_reads)
            return results
        wanted = sorted({(plan.rubric, *key) for plan in plans for key in plan.prompts()}, key=lambda key: key[2])
        # Each read's group prompt, its affinity: a group's reads go to one data-parallel rank.
        prompt_of = {key: request.groups[index].prompt for index, own_reads in reads_of.items() for key in own_reads}
        answers = await asyncio.gather(*(self._read(request.mode, *key, prompt_of[key]) for key in wanted),
                                       return_exceptions=True)
        read = dict(zip(wanted, answers))
        for index, own_reads in reads_of.items():
            results[index].generated_tokens = sum(read[key].generated_tokens for key in own_reads
                                                  if isinstance(read[key], Verdict))
        for plan in plans:
            plan.result.per_rubric.append(RubricGroupResult(
                plan.rubric.name, self.content_hash(plan.rubric, judge_model, plan.listed, reasoning),
                plan.outcome(read, request.aggregation), plan.rationales(read) if reasoning else []))
        for result in results:
            if result.failure is None:
                combine(result, [weight for _, weight in request.rubrics])
        return results

    def _plan(self, index: int, group: Group, texts: list[str], rubric: Rubric, neighbours: int,
              result: GroupResult, reasoning: bool) -> _RubricPlan | _ListPlan:
        prompt = self.prompt_for(rubric)
        listwise = result.schedule is Schedule.LISTWISE
        shared = prompt.shared(group.prompt, group.reference)
        responses = [tuple(prompt.response(text)) for text in texts]
        limit = self._engine.max_model_len - 1
        fixed = prompt.fixed_tokens(shared, reasoning=reasoning)
        for i, (text, ids) in enumerate(zip(group.completions, responses)):
            where = f"groups[{index}].completions[{i}]"
            if result.member_failures[i] is not None:
                continue
            if is_blank(text):
                result.member_failures[i] = ItemFailure("INVALID_ARGUMENT", f"{where}: must not be empty", where)
            elif fixed + 2 * len(ids) > limit:
                result.member_failures[i] = ItemFailure(
                    "INVALID_ARGUMENT",
                    f"{where}: a comparison of this completion with one of its length is {fixed + 2 * len(ids)} "
                    f"tokens{' with the least room to reason' if reasoning else ''}, over the judge's limit of "
                    f"{limit} (max_model_len {self._engine.max_model_len})", where)
        members = [i for i, failure in enumerate(result.member_failures) if failure is None]
        if listwise:
            return self._list_plan(index, texts, rubric, shared, responses, members, result, reasoning)
        plan = _RubricPlan(rubric, result, len(texts), anchored=result.schedule is Schedule.ANCHOR)
        if plan.anchored:
            anchor = tuple(prompt.response(group.anchor or ""))
            for i in members:
                if fixed + len(anchor) + len(responses[i]) > limit:
                    where = f"groups[{index}].completions[{i}]"
                    result.member_failures[i] = ItemFailure(
                        "INVALID_ARGUMENT", f"{where}: this completion and the anchor do not fit the judge's "
                        f"context of {self._engine.max_model_len} tokens", where)
            members = [i for i in members if result.member_failures[i] is None]
        plan.copies = distinct(texts, members)
        if plan.anchored:
            for i in plan.copies:
                plan.pairs[i] = (prompt.listing(shared, (responses[i], anchor), reasoning),
                                 prompt.listing(shared, (anchor, responses[i]), reasoning))
        else:
            for i, j in pairs(texts, list(plan.copies), result.schedule, neighbours):
                plan.pairs[(i, j)] = (prompt.listing(shared, (responses[i], responses[j]), reasoning),
                                      prompt.listing(shared, (responses[j], responses[i]), reasoning))
        return plan

    def _list_plan(self, index: int, texts: list[str], rubric: Rubric, shared: GroupInput,
                   responses: list[tuple[int, ...]], members: list[int], result: GroupResult,
                   reasoning: bool) -> _ListPlan:
        """The group's distinct texts listed once per cyclic shift; fewer than two: nothing to read."""
        prompt = self.prompt_for(rubric)
        copies = distinct(texts, members)
        listed = list(copies)
        plan = _ListPlan(rubric, result, texts, listed=max(PAIR, len(listed)), copies=copies)
        if len(listed) < PAIR:
            return plan
        _check_listable(index, len(listed), prompt, reasoning)
        limit = self._engine.max_model_len - 1
        tokens = prompt.fixed_tokens(shared, len(listed), reasoning) + sum(len(responses[i]) for i in listed)
        if tokens > limit:
            where = f"groups[{index}].completions"
            raise ItemFailure("INVALID_ARGUMENT", f"{where}: the list of its {len(listed)} distinct completions is "
                              f"{tokens} tokens, over the judge's limit of {limit} (max_model_len "
                              f"{self._engine.max_model_len}); use a pair schedule", where)
        for order in cyclic_shifts(texts, listed):
            plan.shifts.append((tuple(order), prompt.listing(shared, [responses[i] for i in order], reasoning)))
        return plan

    async def _read(self, mode: ScoringMode, rubric: Rubric, listed: int, ids: tuple[int, ...],
                    affinity: str) -> Verdict:
        """The verdict of one prompt (`ids` ends at the verdict slot, or in reasoning mode
        where the judge writes), read in `mode`; affinity: its group's prompt."""
        prompt = self.prompt_for(rubric)
        plan = prompt.layout(listed).slot.plan
        if isinstance(mode, Sampling):
            return await self._sampled(mode, listed, ids, affinity)
        rationale, generated = "", 0
        if isinstance(mode, Reasoning):
            layout = prompt.reasoning(listed)
            budget = layout.budget(len(ids), self._engine.max_model_len, mode.max_tokens)
            reasoned = await write_then_read(self._engine, layout, plan, list(ids), budget, mode.temperature,
                                             affinity)
            probability, rationale, generated = reasoned.probabilities, reasoned.rationale, reasoned.generated_tokens
        else:
            probability = await plan.read(self._engine, list(ids), affinity)
        letters = [probability[letter] for letter in LETTERS[:listed]]
        mass = math.fsum(letters)
        if not mass > 0.0 or not math.isfinite(mass):
            raise NoLabelMass("the judge put no probability on any verdict letter")
        return Verdict(tuple(p / mass for p in letters), min(1.0, mass), rationale, generated)

    async def _sampled(self, mode: Sampling, listed: int, ids: tuple[int, ...], affinity: str) -> Verdict:
        """n verdicts sampled at the slot, one token each, seeded by the prompt (the same
        prompt samples the same, whatever the group's order): each letter's frequency among
        the samples that are a listed letter, and their share as the mass."""
        seed = int.from_bytes(hashlib.sha256(repr(ids).encode()).digest()[:4], "big") >> 1
        samples = await self._engine.sample(list(ids), mode.n, mode.temperature, 1, seed=seed, affinity=affinity)
        counts = Counter(text.strip() for text in samples)
        letters = [counts[letter] for letter in LETTERS[:listed]]
        valid = sum(letters)
        if not valid:
            raise NoLabelMass(f"none of the judge's {len(samples)} sampled verdicts was a verdict letter")
        return Verdict(tuple(c / valid for c in letters), valid / len(samples), "", mode.n)

    def _most_generated(self, mode: ScoringMode, rubric: Rubric, listed: int, ids: tuple[int, ...]) -> int:
        """The most tokens the judge may generate for one prompt in `mode` (a dry run's count)."""
        if isinstance(mode, Reasoning):
            return self.prompt_for(rubric).reasoning(listed).budget(len(ids), self._engine.max_model_len,
                                                                    mode.max_tokens)
        return mode.n if isinstance(mode, Sampling) else 0


@dataclass
class _RubricPlan:
    """One rubric's reads for one group: per pair (or per member against the anchor) the
    prompt ids of both orders."""

    rubric: Rubric
    result: GroupResult
    size: int
    anchored: bool
    pairs: dict = field(default_factory=dict)  # keyed by representatives
    copies: dict[int, tuple[int, ...]] = field(default_factory=dict)  # representative: the members with its text
    listed = PAIR  # letters per prompt

    def prompts(self) -> list[tuple[int, tuple[int, ...]]]:
        return [(PAIR, ids) for both in self.pairs.values() for ids in both]

    def outcome(self, read: dict, aggregation: Aggregation) -> GroupOutcome:
        verdicts = {}
        for key, (forward, backward) in self.pairs.items():
            answers = [read[(self.rubric, PAIR, forward)], read[(self.rubric, PAIR, backward)]]
            failed = next((a for a in answers if isinstance(a, BaseException)), None)
            if failed is not None:  # a failed read: the pair is left out, its members may still be compared
                members = key if isinstance(key, tuple) else (key,)
                _fail_members(self.result, [a for i in members for a in self.copies[i]], failed, self.rubric.name)
                continue
            verdicts[key] = PairVerdict(*(OrderRead(answer.p_letters[0], answer.mass) for answer in answers))
        if self.anchored:
            return anchor_outcome(self.size, verdicts, self.copies)
        return aggregate(self.size, verdicts, aggregation, self.copies)

    def rationales(self, read: dict) -> list[Rationale]:
        """Each order's text, in the pairs' canonical order, forward then backward."""
        written = []
        for key, (forward, backward) in self.pairs.items():
            i, j = (key, ANCHOR) if self.anchored else key
            for listed, ids in (((i, j), forward), ((j, i), backward)):
                answer = read[(self.rubric, PAIR, ids)]
                if isinstance(answer, Verdict):
                    written.append(Rationale(listed, answer.rationale))
        return written


@dataclass
class _ListPlan:
    """One rubric's listwise reads for one group: per cyclic shift of the canonical order,
    the members as listed and the prompt ids."""

    rubric: Rubric
    result: GroupResult
    texts: list[str]
    listed: int  # letters per prompt
    copies: dict[int, tuple[int, ...]]  # representative (listed): the members with its text
    shifts: list[tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)

    def prompts(self) -> list[tuple[int, tuple[int, ...]]]:
        return [(self.listed, ids) for _, ids in self.shifts]

    def outcome(self, read: dict, aggregation: Aggregation) -> GroupOutcome:
        answers = [read[(self.rubric, self.listed, ids)] for _, ids in self.shifts]
        failed = next((a for a in answers if isinstance(a, BaseException)), None)
        if failed is not None:  # without every shift the position bias would not cancel: nobody is ranked
            _fail_members(self.result, [a for i in self.shifts[0][0] for a in self.copies[i]], failed,
                          self.rubric.name)
            return listwise_outcome(self.texts, [])
        return listwise_outcome(self.texts, [ListRead(members, answer.p_letters, answer.mass)
                                             for (members, _), answer in zip(self.shifts, answers)], self.copies)

    def rationales(self, read: dict) -> list[Rationale]:
        """Each cyclic shift's text, the canonical order's first."""
        answers = [(members, read[(self.rubric, self.listed, ids)]) for members, ids in self.shifts]
        return [Rationale(members, answer.rationale) for members, answer in answers if isinstance(answer, Verdict)]


def _check_listable(index: int, size: int, prompt: ComparisonPrompt, reasoning: bool) -> None:
    """A group larger than the letters this judge reads as one token (in reasoning mode,
    after its comparison too) fails as a whole."""
    if size < PAIR:
        return
    try:
        prompt.layout(size)
        if reasoning:
            prompt.reasoning(size)
    except LabelTokenError:
        where = f"groups[{index}].completions"
        raise ItemFailure("INVALID_ARGUMENT", f"{where}: {size} completions exceed the listwise limit of "
                          f"{prompt.max_listed()} (the letters Response A, B, ... that this judge reads as one token "
                          "at the verdict); use a pair schedule or smaller groups", where) from None


def _fail_members(result: GroupResult, members: Sequence[int], error: BaseException, rubric: str) -> None:
    for i in members:
        if result.member_failures[i] is None:
            # An engine's refusal keeps its code (a remote judge server that refused the read).
            code = error.code if isinstance(error, EngineRequestError) else "INTERNAL"
            result.member_failures[i] = ItemFailure(code, f"rubric {rubric!r}: a comparison read failed: "
                                                    f"{type(error).__name__}: {error}")


def _removed(group: Group, defences: Defences) -> tuple[list[str], list[int]]:
    """The members' texts as the comparison reads them (claims removed, then the first of
    their slot reads: defences.reads), and the claims removed from each."""
    removed = [defences.removed(text) for text in group.completions]
    return ([defences.reads(text, group.prompt, group.reference).first for text, _ in removed],
            [count for _, count in removed])


def _anchor_as_read(group: Group, defences: Defences) -> Group:
    """The group with its anchor written as the members' first read writes a text (numerals
    its source holds masked), so a member and the anchor are compared in the same form: the
    anchor against itself is a tie."""
    if not group.anchor:
        return group
    anchor = defences.reads(group.anchor, group.prompt, group.reference).first
    return group if anchor == group.anchor else replace(group, anchor=anchor)
