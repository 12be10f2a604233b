"""Scores a checked request: resolves its rubrics to scorers (callers' rubrics
prepared once), then one engine request per (item, scorer), identical requests
scored once, every scorer's requests in flight together so vLLM batches them,
then one reward per item. What a score slot reads passes the defences first
(defences/chain.py): score claims removed, then the bounded text read, and where the
bound hid what the source does not vouch for, the text as written too, the lower reward kept.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from geval_server.api.wire import Choice, ValidGroups, ValidRequest
from geval_server.defences.chain import Defences, DefenceSettings, SlotReads, defences_for
from geval_server.engine.protocol import JudgeEngine
from geval_server.groupwise.judge import GroupJudge, GroupRequest, GroupResult
from geval_server.groupwise.plan import Group
from geval_server.groupwise.prompt import PAIR
from geval_server.scorers.base import ItemFailure, JudgeInput, Kind, Score, Scorer, ScorerInfo
from geval_server.scorers.geval.expected_score import NoLabelMass
from geval_server.scorers.geval.inline import InlineRubrics
from geval_server.scorers.geval.rubrics import Rubric, RubricError
from geval_server.scorers.geval.slot import LabelTokenError
from geval_server.scorers.scoring_mode import Logprobs, Reasoning, ScoringMode

log = logging.getLogger(__name__)

Selection = Sequence[tuple[Scorer, float]]  # an item's scorers and their weights


class UnservableRubric(ValueError):
    """A rubric sent for the whole request that this judge cannot read (a label it cannot
    spell, one of its control tokens in the text): the caller's to fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class ItemScore:
    scorer: Scorer
    score: Score


@dataclass
class ItemOutcome:
    reward: float = 0.0
    scores: list[ItemScore] = field(default_factory=list)
    failure: ItemFailure | None = None
    score_claims_removed: int = 0
    masked_read_lowered: bool = False  # the read with numerals masked was lower and set the reward
    plain_reward: float = 0.0  # the reward before the masked read bounded it
    read_twice: bool = False  # the bound changed the completion, so its slot readers read it twice
    # per scorer that reads a slot: what the bound took off its reward (plain - kept, >= 0)
    bound_gaps: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class BoundSummary:
    """What the bound did to one rubric over a call's items: a policy that learns to sway
    the judge's slot shows as a rising lowered share and gap."""

    rubric: str
    items: int  # items the rubric scored
    read_twice: int  # of them, read a second time (the bound changed the completion)
    lowered: int  # of them, whose reward the bounded read lowered
    gap_sum: float  # sum over them of plain - bounded reward

    @property
    def lowered_share(self) -> float:
        return self.lowered / self.items

    @property
    def mean_gap(self) -> float:
        return self.gap_sum / self.items


def bound_summaries(outcomes: Iterable[ItemOutcome]) -> list[BoundSummary]:
    """Per rubric read at a slot, in first-seen order, over the items scored without failure."""
    counts: dict[str, list] = {}
    for outcome in outcomes:
        if outcome.failure is not None:
            continue
        for rubric, gap in outcome.bound_gaps.items():
            count = counts.setdefault(rubric, [0, 0, 0, 0.0])
            count[0] += 1
            count[1] += outcome.read_twice
            count[2] += gap > 0
            count[3] += gap
    return [BoundSummary(rubric, *count) for rubric, count in counts.items()]


class Judge:
    def __init__(
        self,
        engine: JudgeEngine,
        scorers: Mapping[str, Scorer],
        judge_model: str,
        inline: InlineRubrics,
        groups: GroupJudge,
        defences: DefenceSettings = DefenceSettings(),
    ) -> None:
        """scorers: the served ones by name; inline: where callers' rubrics are prepared;
        groups: what compares a group's completions (ScoreGroups).
        defences: which defences guard what a score slot reads (defences/chain.py)."""
        self.engine = engine
        self.scorers = dict(scorers)
        self.judge_model = judge_model
        self.inline = inline
        self.groups = groups
        self.defences = defences
        self._served_criteria = frozenset(_criteria(self.scorers.values()))

    @property
    def needs_reference(self) -> dict[str, bool]:
        """Every scorer served, and whether it needs the item's reference."""
        return {name: scorer.needs_reference for name, scorer in self.scorers.items()}

    async def score_request(self, request: ValidRequest) -> list[ItemOutcome]:
        """Scores a checked request. A request rubric the judge cannot read raises
        UnservableRubric; an item's own one fails that item."""
        resolved = await self._resolve(request.choices)
        for i, (choice, _) in enumerate(request.selection):
            if isinstance(resolved[choice], BaseException):
                raise UnservableRubric(f"rubrics[{i}].spec", _unservable(resolved[choice]))
        items: list[JudgeInput | ItemFailure] = []
        selections: list[Selection] = []
        for index, (item, own) in enumerate(zip(request.items, request.item_selections)):
            chosen = own or request.selection
            failed = [(j, resolved[c]) for j, (c, _) in enumerate(chosen) if isinstance(resolved[c], BaseException)]
            if failed and not isinstance(item, ItemFailure):
                j, error = failed[0]
                field = f"items[{index}].rubrics[{j}].spec"
                item = ItemFailure("INVALID_ARGUMENT", f"{field}: {_unservable(error)}", field)
            items.append(item)
            selections.append([] if failed else [(resolved[c], weight) for c, weight in chosen])
        return await self.score(items, selections, request.mode)

    async def score_groups(self, request: ValidGroups) -> list[GroupResult]:
        """Compares each group's completions on the request's rubrics, which must be G-Eval
        rubrics the judge can also read as comparisons (else UnservableRubric)."""
        resolved = await self._resolve(choice for choice, _ in request.selection)
        rubrics: list[tuple[Rubric, float]] = []
        for i, (choice, weight) in enumerate(request.selection):
            scorer = resolved[choice]
            field = f"rubrics[{i}]" + (".spec" if isinstance(choice, Rubric) else ".name")
            if isinstance(scorer, BaseException):
                raise UnservableRubric(field, _unservable(scorer))
            if scorer.kind is not Kind.GEVAL:
                raise UnservableRubric(field, f"{scorer.name!r} is a {scorer.kind.value} scorer; groups are compared "
                                       "on G-Eval rubrics only")
            try:
                prompt = self.groups.prompt_for(scorer.prepared.rubric)
                if isinstance(request.mode, Reasoning):
                    prompt.reasoning(PAIR)
            except (LabelTokenError, RubricError) as error:
                raise UnservableRubric(field, f"cannot be read as a comparison: {error}") from error
            rubrics.append((scorer.prepared.rubric, weight))
        defences = self._defences([[(resolved[c], w) for c, w in request.selection]])
        groups = GroupRequest(request.groups, rubrics, request.schedule, request.neighbours, request.aggregation,
                              request.mode, request.dry_run)
        bounded = _bounded_groups(groups, defences)
        if bounded is None:
            return await self.groups.judge(groups, defences, self.judge_model)
        plain, second = await asyncio.gather(self.groups.judge(groups, defences, self.judge_model),
                                             self.groups.judge(bounded, defences, self.judge_model))
        for result, read in zip(plain, second):
            _lower_rewards(result, read, [weight for _, weight in rubrics])
        return plain

    async def prepare(self, rubrics: Sequence[Rubric]) -> list[ScorerInfo]:
        """Callers' rubrics prepared as a Score call would (PrepareRubrics), described."""
        resolved = await self._resolve(rubrics)
        for i, rubric in enumerate(rubrics):
            if isinstance(resolved[rubric], BaseException):
                raise UnservableRubric(f"rubrics[{i}]", _unservable(resolved[rubric]))
        return [resolved[rubric].info() for rubric in rubrics]

    async def _resolve(self, choices: Iterable[Choice]) -> dict[Choice, Scorer | BaseException]:
        """Each choice's scorer: served ones by name, inline rubrics prepared (all at once,
        each only the first time it is seen); a preparation that failed gives its exception."""
        distinct = list(dict.fromkeys(choices))
        inline = [choice for choice in distinct if isinstance(choice, Rubric)]
        prepared = await asyncio.gather(*(self.inline.scorer(rubric) for rubric in inline), return_exceptions=True)
        resolved: dict[Choice, Scorer | BaseException] = {c: self.scorers[c] for c in distinct if isinstance(c, str)}
        resolved.update(zip(inline, prepared))
        return resolved

    async def score(
        self,
        items: Sequence[JudgeInput | ItemFailure],
        selections: Sequence[Selection],
        mode: ScoringMode = Logprobs(),
    ) -> list[ItemOutcome]:
        """selections: per item, its scorers and weights (failed items may have none)."""
        outcomes = [ItemOutcome() for _ in items]
        defences = self._defences(selections)
        # (scorer, request) -> the (item, position in its selection, masked read) slots waiting for it
        waiting: dict[tuple[Scorer, Hashable], list[tuple[int, int, bool]]] = {}
        for index, (item, selection) in enumerate(zip(items, selections)):
            if isinstance(item, ItemFailure):
                outcomes[index].failure = item
                continue
            removed = self._without_score_claims(item, outcomes[index], defences)
            first, second = self._slot_items(removed, selection, defences)
            outcomes[index].read_twice = second is not None
            try:
                wanted = [(s, s.request(first if s.reads_score_slot else item, f"items[{index}]"))
                          for s, _ in selection]
                # The second reads bound the slot readers' rewards: the same positions, read twice.
                wanted += [(s, s.request(second, f"items[{index}]")) for s, _ in selection
                           if second is not None and s.reads_score_slot]
            except ItemFailure as failure:
                outcomes[index].failure = failure
                continue
            for read, key in enumerate(wanted):
                waiting.setdefault(key, []).append((index, *_slot(read, selection)))

        requests: dict[Scorer, list[Hashable]] = {}
        for scorer, request in waiting:
            requests.setdefault(scorer, []).append(request)
        results = await asyncio.gather(
            *(scorer.score(batch, mode) for scorer, batch in requests.items()), return_exceptions=True
        )
        by_key: dict[tuple[Scorer, Hashable], Score | BaseException] = {}
        for (scorer, batch), scored in zip(requests.items(), results):
            per_request = [scored] * len(batch) if isinstance(scored, BaseException) else scored
            by_key.update(zip(((scorer, request) for request in batch), per_request))

        per_item: dict[int, dict[tuple[int, bool], ItemScore]] = {}
        for key, result in by_key.items():
            scorer = key[0]
            for index, position, masked in waiting[key]:
                if isinstance(result, BaseException):
                    failure = self._as_failure(result, scorer.name)
                    outcomes[index].failure = outcomes[index].failure or failure
                else:
                    per_item.setdefault(index, {})[position, masked] = ItemScore(scorer, result)
        for index, reads in per_item.items():
            outcome = outcomes[index]
            plain = {p: read for (p, masked), read in reads.items() if not masked}
            bounded = dict(plain)
            for (position, masked), read in reads.items():
                if masked and position in bounded and read.score.reward < bounded[position].score.reward:
                    bounded[position] = read  # the bound: a claim can only lower the reward
                    outcome.masked_read_lowered = True
            outcome.scores = [bounded[p] for p in sorted(bounded)]
            outcome.bound_gaps = {read.scorer.name: read.score.reward - bounded[p].score.reward
                                  for p, read in plain.items() if read.scorer.reads_score_slot}
            if outcome.failure is None:
                weights = [weight for _, weight in selections[index]]
                outcome.reward = weighted_reward([s.score.reward for s in outcome.scores], weights)
                outcome.plain_reward = (weighted_reward([plain[p].score.reward for p in sorted(plain)], weights)
                                        if outcome.masked_read_lowered else outcome.reward)  # else the same reads
        return outcomes

    def _defences(self, selections: Sequence[Selection]) -> Defences:
        """Claims of every served criterion and of the call's inline rubrics are removed."""
        chosen = {scorer for selection in selections for scorer, _ in selection}
        return defences_for(self._served_criteria | frozenset(_criteria(chosen)), self.defences)

    @staticmethod
    def _without_score_claims(item: JudgeInput, outcome: ItemOutcome, defences: Defences) -> JudgeInput:
        """The item with score claims and lines addressed to the grader removed from its
        completion, counted on the outcome."""
        completion, outcome.score_claims_removed = defences.removed(item.completion)
        return dataclasses.replace(item, completion=completion) if outcome.score_claims_removed else item

    @staticmethod
    def _slot_items(item: JudgeInput, selection: Selection,
                    defences: Defences) -> tuple[JudgeInput, JudgeInput | None]:
        """The item as a score slot first reads it, and as the second read that bounds its
        reward (None: read once), when a scorer of the selection reads a slot
        (defences.reads: the bounded text is always one of them)."""
        if not any(s.reads_score_slot for s, _ in selection):
            return item, None
        reads = defences.reads(item.completion, item.prompt, item.reference)
        first = item if reads.first == item.completion else dataclasses.replace(item, completion=reads.first)
        return first, None if reads.second is None else dataclasses.replace(item, completion=reads.second)

    def _as_failure(self, error: BaseException, scorer: str) -> ItemFailure:
        """A failed request as its items' error: UNAVAILABLE (retry later) when the engine is
        down, INTERNAL for anything else, logged."""
        if isinstance(error, ItemFailure):
            return error
        if isinstance(error, NoLabelMass):
            return ItemFailure("INTERNAL", f"rubric {scorer!r}: {error}")
        if not self.engine.is_running:
            return ItemFailure("UNAVAILABLE", f"rubric {scorer!r}: the judge engine is down: {error}")
        log.error("scoring with %s failed", scorer, exc_info=error)
        return ItemFailure("INTERNAL", f"rubric {scorer!r}: scoring failed: {type(error).__name__}: {error}")


def weighted_reward(rewards: Sequence[float], weights: Sequence[float]) -> float:
    """The item's reward: the weighted mean of its scorers' rewards."""
    return sum(r * w for r, w in zip(rewards, weights)) / sum(weights)


def _unservable(error: BaseException) -> str:
    """Why a caller's rubric cannot be served: one the judge cannot read is the caller's
    to fix; anything else is a server failure, raised as such."""
    if isinstance(error, LabelTokenError | RubricError):
        return str(error)
    raise error


def _criteria(scorers: Iterable[Scorer]) -> Iterable[str]:
    """The criteria whose claims are removed: those of the scorers that read a score slot."""
    return (s.info().details.criterion for s in scorers if s.reads_score_slot)


def _bounded_groups(request: GroupRequest, defences: Defences) -> GroupRequest | None:
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


def _lower_rewards(result: GroupResult, bounded: GroupResult, weights: Sequence[float]) -> None:
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


def _slot(read: int, selection: Selection) -> tuple[int, bool]:
    """(the selection position a read belongs to, whether it is a masked read): the plain
    reads come first, one per scorer, then the masked reads of the scorers that read a
    slot, in the same order."""
    if read < len(selection):
        return read, False
    readers = [p for p, (s, _) in enumerate(selection) if s.reads_score_slot]
    return readers[read - len(selection)], True
