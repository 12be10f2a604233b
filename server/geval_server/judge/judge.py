"""Scores a checked request: resolves its rubrics to scorers (callers' rubrics
prepared once), then in four steps: plan one engine request per (item, scorer) (reads.py),
read every distinct request with all scorers in flight together so vLLM batches them,
bound (bound.py), weigh into one reward per item (weigh.py). What a score slot reads passes the defences first
(defences/chain.py): score claims removed, then the bounded text read, and where the
bound hid what the source does not vouch for, the text as written too, the lower reward kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Iterable, Mapping, Sequence

from geval_server.defences.chain import Defences, DefenceSettings, defences_for
from geval_server.engine.protocol import ClassifierEngine, EngineRequestError, JudgeEngine
from geval_server.groupwise.judge import GroupJudge, GroupRequest, GroupResult
from geval_server.groupwise.prompt import PAIR
from geval_server.groupwise.reward_model import add_reward_models
from geval_server.groupwise.reward_model import judge_groups as reward_model_groups
from geval_server.judge.bound import BoundScores, bound, bounded_groups, lower_group_rewards
from geval_server.judge.inputs import Choice, Selection, UnservableRubric, ValidGroups, ValidRequest
from geval_server.judge.outcomes import ItemOutcome
from geval_server.judge.reads import ItemPlan, plan_item
from geval_server.judge.weigh import weigh
from geval_server.scorers.base import ItemFailure, JudgeInput, Kind, Score, Scorer, ScorerInfo
from geval_server.scorers.geval.expected_score import NoLabelMass
from geval_server.scorers.geval.inline import InlineRubrics
from geval_server.scorers.geval.rubrics import Rubric, RubricError
from geval_server.scorers.geval.slot import LabelTokenError
from geval_server.scorers.scoring_mode import Logprobs, Reasoning, ScoringMode

log = logging.getLogger(__name__)


class Judge:
    def __init__(
        self,
        engine: JudgeEngine | ClassifierEngine,
        scorers: Mapping[str, Scorer],
        judge_model: str,
        inline: InlineRubrics,
        groups: GroupJudge | None,
        defences: DefenceSettings = DefenceSettings(),
    ) -> None:
        """engine: the judge's (a reward model's where the server serves no judge);
        scorers: the served ones by name; inline: where callers' rubrics are prepared;
        groups: what compares a group's completions on G-Eval rubrics (ScoreGroups; None
        without a judge). defences: which defences guard what a score slot reads
        (defences/chain.py)."""
        self.engine = engine
        self.engines = [engine]  # every engine the server runs; a reward model's joins beside the judge's
        self.scorers = dict(scorers)
        self.judge_model = judge_model
        self.inline = inline
        self.groups = groups
        self.defences = defences
        self._served_criteria = frozenset(_criteria(self.scorers.values()))

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
        """Compares each group's completions on the request's rubrics: G-Eval rubrics the judge
        can also read as comparisons, and reward models (else UnservableRubric). With both, each
        member's reward is the weighted mean over all of them."""
        resolved = await self._resolve(choice for choice, _ in request.selection)
        is_model = {c: not isinstance(s, BaseException) and s.kind is Kind.REWARD_MODEL for c, s in resolved.items()}
        models = [(resolved[c], w) for c, w in request.selection if is_model[c]]
        judged = [(i, (c, w)) for i, (c, w) in enumerate(request.selection) if not is_model[c]]
        if not judged:
            return await reward_model_groups(request.groups, models, request.mode, request.dry_run)
        rubrics: list[tuple[Rubric, float]] = []
        for i, (choice, weight) in judged:
            scorer = resolved[choice]
            field = f"rubrics[{i}]" + (".spec" if isinstance(choice, Rubric) else ".name")
            if isinstance(scorer, BaseException):
                raise UnservableRubric(field, _unservable(scorer))
            if scorer.kind is not Kind.GEVAL:
                raise UnservableRubric(field, f"{scorer.name!r} is a {scorer.kind.value} scorer; groups are compared "
                                       "on G-Eval rubrics and reward models")
            try:
                prompt = self.groups.prompt_for(scorer.prepared.rubric)
                if isinstance(request.mode, Reasoning):
                    prompt.reasoning(PAIR)
            except (LabelTokenError, RubricError) as error:
                raise UnservableRubric(field, f"cannot be read as a comparison: {error}") from error
            rubrics.append((scorer.prepared.rubric, weight))
        defences = self._defences([[(resolved[c], w) for _, (c, w) in judged]])
        groups = GroupRequest(request.groups, rubrics, request.schedule, request.neighbours, request.aggregation,
                              request.mode, request.dry_run)
        if not models:
            return await self._compare(groups, defences)
        results, by_models = await asyncio.gather(
            self._compare(groups, defences), reward_model_groups(request.groups, models, request.mode, request.dry_run))
        add_reward_models(results, by_models, [w for _, w in rubrics] + [w for _, w in models])
        return results

    async def _compare(self, groups: GroupRequest, defences: Defences) -> list[GroupResult]:
        """The judge's comparisons, bounded as a slot read is (bound.py)."""
        bounded = bounded_groups(groups, defences)
        if bounded is None:
            return await self.groups.judge(groups, defences, self.judge_model)
        plain, second = await asyncio.gather(self.groups.judge(groups, defences, self.judge_model),
                                             self.groups.judge(bounded, defences, self.judge_model))
        for result, read in zip(plain, second):
            lower_group_rewards(result, read, [weight for _, weight in groups.rubrics])
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
        """selections: per item, its scorers and weights (failed items may have none).
        Plan the reads, read them all at once, bound, weigh."""
        defences = self._defences(selections)
        plans = [plan_item(index, item, selection, defences)
                 for index, (item, selection) in enumerate(zip(items, selections))]
        scored = await self._read(plans, mode)
        return [weigh(plan, *self._bounded(plan, scored)) for plan in plans]

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
        if isinstance(error, NoLabelMass):
            return ItemFailure("INTERNAL", f"rubric {scorer!r}: {error}")
        if not self.running:
            return ItemFailure("UNAVAILABLE", f"rubric {scorer!r}: an engine is down: {error}")
        log.error("scoring with %s failed", scorer, exc_info=error)
        return ItemFailure("INTERNAL", f"rubric {scorer!r}: scoring failed: {type(error).__name__}: {error}")


def _unservable(error: BaseException) -> str:
    """Why a caller's rubric cannot be served: one the judge cannot read is the caller's
    to fix; anything else is a server failure, raised as such."""
    if isinstance(error, LabelTokenError | RubricError):
        return str(error)
    raise error


def _criteria(scorers: Iterable[Scorer]) -> Iterable[str]:
    """The criteria whose claims are removed: those of the scorers that read a score slot."""
    return (s.info().details.criterion for s in scorers if s.reads_score_slot)
