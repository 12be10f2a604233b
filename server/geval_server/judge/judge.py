"""Scores a checked request: resolves its rubrics to scorers (callers' rubrics
prepared once), checks the request's gate first where it has one (gate.py: an item that fails
it is read by nothing else), then in four steps: plan one engine request per (item, scorer)
(reads.py), read every distinct request with all scorers in flight together so vLLM batches
them, bound (bound.py), weigh into one reward per item (weigh.py). What a score slot reads
passes the defences first (defences/chain.py): score claims removed, then the bounded text
read, and where the bound hid what the source does not vouch for, the text as written too,
the lower reward kept. Groups are compared by each scorer's comparer (groupwise/comparer.py).
The judge knows scorers only through their interface (scorers/base.py), never their kinds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Iterable, Mapping, Sequence

from geval_server.defences.chain import Defences, DefenceSettings, defences_for
from geval_server.engine.protocol import Engine, EngineRequestError
from geval_server.groupwise.comparer import GroupCall, merge
from geval_server.groupwise.results import GroupResult
from geval_server.judge.bound import BoundScores, bound
from geval_server.judge.gate import Gate, gated_outcome, narrow_groups, widen_groups
from geval_server.judge.inputs import Choice, Selection, UnservableRubric, ValidGroups, ValidRequest
from geval_server.judge.outcomes import ItemOutcome
from geval_server.judge.reads import ItemPlan, plan_item
from geval_server.judge.weigh import weigh
from geval_server.scorers.base import ItemFailure, JudgeInput, ReadFailure, Score, Scorer, ScorerInfo, Unservable
from geval_server.scorers.inline import InlineRubrics
from geval_server.scorers.scoring_mode import Logprobs, ScoringMode

log = logging.getLogger(__name__)


class Judge:
    def __init__(
        self,
        engines: Sequence[Engine],
        scorers: Mapping[str, Scorer],
        judge_model: str,
        inline: InlineRubrics,
        defences: DefenceSettings = DefenceSettings(),
    ) -> None:
        """engines: every engine the server runs, the judge's first (a reward model's where the
        server serves no judge); scorers: the served ones by name; inline: where callers'
        rubrics are prepared; defences: which defences guard what a score slot reads
        (defences/chain.py)."""
        self.engines = list(engines)
        self.scorers = dict(scorers)
        self.judge_model = judge_model
        self.inline = inline
        self.defences = defences
        self.default_rubric = ""  # set once the server knows what it serves
        self.refresh()

    def refresh(self) -> None:
        """Takes in the scorers added since construction (the server adds them kind by kind)."""
        self._served_criteria = frozenset(_criteria(self.scorers.values()))

    @property
    def engine(self) -> Engine | None:
        """The first engine: the judge's, or a reward model's served alone; None where none runs."""
        return self.engines[0] if self.engines else None

    @property
    def running(self) -> bool:
        """Every engine is up: one that died makes the server restart."""
        return all(engine.is_running for engine in self.engines)

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
                raise UnservableRubric(f"rubrics[{i}]" + _spec_field(choice), _unservable(resolved[choice]))
        gate = await self._gate(request.gate, request.gate_reward)
        items: list[JudgeInput | ItemFailure] = []
        selections: list[Selection] = []
        for index, (item, own) in enumerate(zip(request.items, request.item_selections)):
            chosen = own or request.selection
            failed = [(j, c, resolved[c]) for j, (c, _) in enumerate(chosen) if isinstance(resolved[c], BaseException)]
            if failed and not isinstance(item, ItemFailure):
                j, choice, error = failed[0]
                field = f"items[{index}].rubrics[{j}]" + _spec_field(choice)
                item = ItemFailure("INVALID_ARGUMENT", f"{field}: {_unservable(error)}", field)
            items.append(item)
            selections.append([] if failed else [(resolved[c], weight) for c, weight in chosen])
        return await self.score(items, selections, request.mode, gate)

    async def score_groups(self, request: ValidGroups) -> list[GroupResult]:
        """Compares each group's completions on the request's rubrics, each through its
        scorer's comparer (else UnservableRubric); with several comparers, each member's reward
        is the weighted mean over all of them. Members that fail the gate are left out."""
        resolved = await self._resolve(choice for choice, _ in request.selection)
        by_comparer: dict[object, list[tuple[Scorer, float]]] = {}
        for i, (choice, weight) in enumerate(request.selection):
            scorer = resolved[choice]
            field = f"rubrics[{i}]" + (_spec_field(choice) or ".name")
            if isinstance(scorer, BaseException):
                raise UnservableRubric(field, _unservable(scorer))
            if scorer.comparer is None:
                comparable = sorted({s.kind for s in self.scorers.values() if s.comparer is not None})
                raise UnservableRubric(field, f"{scorer.name!r} is a {scorer.kind} scorer, which is not compared "
                                       f"within groups; the kinds compared here: {', '.join(comparable)}")
            try:
                scorer.comparer.check(scorer, request.mode)
            except Unservable as error:
                raise UnservableRubric(field, f"cannot be read as a comparison: {error}") from error
            by_comparer.setdefault(scorer.comparer, []).append((scorer, weight))
        gate = await self._gate(request.gate, request.gate_reward)
        groups = request.groups
        passed = None
        if gate is not None:
            passed = await gate.check_groups(groups, request.dry_run)
            groups = narrow_groups(groups, passed)
        call = GroupCall(groups, request.schedule, request.neighbours, request.aggregation, request.mode,
                         request.dry_run)
        defences = self._defences([[pair for chosen in by_comparer.values() for pair in chosen]])
        answers = await asyncio.gather(*(comparer.compare(call, chosen, defences)
                                         for comparer, chosen in by_comparer.items()))
        results = merge(answers, [[weight for _, weight in chosen] for chosen in by_comparer.values()])
        order = {resolved[choice].name: i for i, (choice, _) in enumerate(request.selection)}
        for result in results:  # each rubric's comparisons in the order the request named them
            result.per_rubric.sort(key=lambda per: order[per.rubric])
        return results if passed is None else widen_groups(results, passed, gate)

    async def _gate(self, choice: Choice | None, reward: float) -> Gate | None:
        """The request's gate as a scorer that can gate (a rule), or UnservableRubric naming `gate`."""
        if choice is None:
            return None
        scorer = (await self._resolve([choice]))[choice]
        field = "gate" + (_spec_field(choice) or ".name")
        if isinstance(scorer, BaseException):
            raise UnservableRubric(field, _unservable(scorer))
        if not scorer.can_gate:
            raise UnservableRubric(field, f"{scorer.name!r} is a {scorer.kind} scorer, whose reward is not pass or "
                                   "fail; a gate is a rule (GetInfo lists the rules served)")
        return Gate(scorer, reward)

    async def prepare(self, rubrics: Sequence[tuple[Choice, str]]) -> list[ScorerInfo]:
        """Callers' rubrics prepared as a Score call would (PrepareRubrics), described in order;
        each comes with its field in the request, named when the judge cannot read it."""
        resolved = await self._resolve(choice for choice, _ in rubrics)
        for choice, field in rubrics:
            if isinstance(resolved[choice], BaseException):
                raise UnservableRubric(field, _unservable(resolved[choice]))
        return [resolved[choice].info() for choice, _ in rubrics]

    async def _resolve(self, choices: Iterable[Choice]) -> dict[Choice, Scorer | BaseException]:
        """Each choice's scorer: served ones by name, inline rubrics prepared (all at once,
        each only the first time it is seen); a preparation that failed gives its exception."""
        distinct = list(dict.fromkeys(choices))
        inline = [choice for choice in distinct if not isinstance(choice, str)]
        prepared = await asyncio.gather(*(self.inline.scorer(rubric) for rubric in inline), return_exceptions=True)
        resolved: dict[Choice, Scorer | BaseException] = {c: self.scorers[c] for c in distinct if isinstance(c, str)}
        resolved.update(zip(inline, prepared))
        return resolved

    async def score(
        self,
        items: Sequence[JudgeInput | ItemFailure],
        selections: Sequence[Selection],
        mode: ScoringMode = Logprobs(),
        gate: Gate | None = None,
    ) -> list[ItemOutcome]:
        """selections: per item, its scorers and weights (failed items may have none).
        The gate checked first, where there is one: an item that fails it is read by nothing
        else. Then plan the reads, read them all at once, bound, weigh."""
        checks = await gate.check_items(items) if gate is not None else [None] * len(items)
        selections = [[] if check is not None and not check.passed else selection
                      for check, selection in zip(checks, selections)]
        defences = self._defences(selections)
        plans = [plan_item(index, item, selection, defences)
                 for index, (item, selection) in enumerate(zip(items, selections))]
        scored = await self._read([plan for plan, check in zip(plans, checks) if check is None or check.passed],
                                  mode)
        outcomes = []
        for plan, check in zip(plans, checks):
            if check is None or check.passed:
                outcome = weigh(plan, *self._bounded(plan, scored))
            else:
                outcome = gated_outcome(plan, check, gate)
            if check is not None:
                outcome.gate = check.score
            outcomes.append(outcome)
        return outcomes

    async def _read(self, plans: Sequence[ItemPlan], mode: ScoringMode) -> dict[Hashable, Score | BaseException]:
        """Every distinct request, each scorer's as one batch, all scorers in flight together
        so vLLM batches them; a batch that failed is every one of its requests' result."""
        batches: dict[Scorer, dict[Hashable, None]] = {}
        for plan in plans:
            for read in plan.reads:
                batches.setdefault(read.scorer, {})[read.request] = None
        results = await asyncio.gather(
            *(scorer.score(list(batch), mode) for scorer, batch in batches.items()), return_exceptions=True
        )
        scored: dict[Hashable, Score | BaseException] = {}
        for (scorer, batch), result in zip(batches.items(), results):
            per_request = [result] * len(batch) if isinstance(result, BaseException) else result
            scored.update(zip(((scorer, request) for request in batch), per_request))
        return scored

    def _bounded(self, plan: ItemPlan, scored: Mapping[Hashable, Score | BaseException]
                 ) -> tuple[BoundScores, ItemFailure | None]:
        """The item's scores with the bound applied, and its first failed read."""
        reads, failure = [], None
        for read in plan.reads:
            result = scored[read.key]
            if not isinstance(result, BaseException):
                reads.append((read, result))
            elif failure is None:
                failure = self._as_failure(result, read.scorer.name)
        return bound(reads), failure

    def _defences(self, selections: Sequence[Selection]) -> Defences:
        """Claims of every served criterion and of the call's inline rubrics are removed."""
        chosen = {scorer for selection in selections for scorer, _ in selection}
        return defences_for(self._served_criteria | frozenset(_criteria(chosen)), self.defences)

    def _as_failure(self, error: BaseException, scorer: str) -> ItemFailure:
        """A failed request as its items' error: the engine's own code where it refused the
        request, UNAVAILABLE (retry later) when the engine is down, INTERNAL for anything else, logged."""
        if isinstance(error, ItemFailure):
            return error
        if isinstance(error, EngineRequestError):  # the engine refused this request, saying why
            return ItemFailure(error.code, f"rubric {scorer!r}: {error}")
        if isinstance(error, ReadFailure):
            return ItemFailure("INTERNAL", f"rubric {scorer!r}: {error}")
        if not self.running:
            return ItemFailure("UNAVAILABLE", f"rubric {scorer!r}: an engine is down: {error}")
        log.error("scoring with %s failed", scorer, exc_info=error)
        return ItemFailure("INTERNAL", f"rubric {scorer!r}: scoring failed: {type(error).__name__}: {error}")


def _unservable(error: BaseException) -> str:
    """Why a caller's rubric cannot be served: one the judge cannot read is the caller's
    to fix; anything else is a server failure, raised as such."""
    if isinstance(error, Unservable):
        return str(error)
    raise error


def _spec_field(choice: Choice) -> str:
    """Where a choice sent inline sits in its RubricSelection (`.spec`, `.rule`); empty for a name."""
    return "" if isinstance(choice, str) else f".{choice.wire_field}"


def _criteria(scorers: Iterable[Scorer]) -> Iterable[str]:
    """The criteria whose claims are removed: those of the scorers that read a score slot."""
    return (s.info().details.criterion for s in scorers if s.reads_score_slot)
