"""The RewardService servicer: validates, scores with the judge, answers in protos."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
import uuid

import grpc
from geval_client.pb import reward_pb2, reward_pb2_grpc

from . import __version__, metrics
from .judge import ItemOutcome, ItemScore, Judge
from .scorers.base import Kind, Mode
from .validation import Limits, RequestError, inline_rubrics, scorer_selections, unservable_rubrics, validate

log = logging.getLogger(__name__)

ENGINE_DOWN = "the judge engine is down; the server is restarting, retry"
RETRY_PUSHBACK_MS = 1000

_MODES = {
    Mode.LOGPROBS: reward_pb2.SCORING_MODE_LOGPROBS,
    Mode.SAMPLING: reward_pb2.SCORING_MODE_SAMPLING,
    Mode.REASONING: reward_pb2.SCORING_MODE_REASONING,
}
_KINDS = {Kind.GEVAL: reward_pb2.SCORER_KIND_GEVAL, Kind.SEMSCORE: reward_pb2.SCORER_KIND_SEMSCORE,
          Kind.LIKELIHOOD: reward_pb2.SCORER_KIND_LIKELIHOOD}


class RewardService(reward_pb2_grpc.RewardServiceServicer):
    def __init__(
        self,
        judge: Judge,
        default_rubric: str,
        engine_settings: dict[str, str],
        limits: Limits,
        max_pending_items: int,
        low_confidence_below: float,
    ) -> None:
        self._judge = judge
        self._low_confidence_below = low_confidence_below
        self._default_rubric = default_rubric
        self._engine_settings = engine_settings
        self._limits = limits
        self._max_pending_items = max_pending_items
        self._pending_items = 0

    async def Score(self, request: reward_pb2.ScoreRequest, context) -> reward_pb2.ScoreResponse:
        call = {"call_id": uuid.uuid4().hex[:12], "peer": context.peer(), "items": len(request.items)}
        started = time.perf_counter()
        code = grpc.StatusCode.OK
        try:
            return await self._score(request, call)
        except _Refused as refused:
            code = refused.code
            call["error"] = refused.message
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED  # client cancelled or deadline passed: engine requests aborted
            raise
        except Exception as error:  # a bug: answered and logged as what it is, never as OK
            code = grpc.StatusCode.INTERNAL
            call["error"] = f"internal error: {type(error).__name__}: {error}"
            log.exception("Score call %s failed", call["call_id"])
        finally:
            seconds = time.perf_counter() - started
            log.info(json.dumps({"event": "score", **call, "code": code.name, "seconds": round(seconds, 4)}))
        # grpc-retry-pushback-ms: the standard hint for when a retry may succeed
        pushback = (("grpc-retry-pushback-ms", str(RETRY_PUSHBACK_MS)),)
        await context.abort(
            code, call["error"], trailing_metadata=pushback if code is grpc.StatusCode.RESOURCE_EXHAUSTED else ()
        )

    async def _score(self, request: reward_pb2.ScoreRequest, call: dict) -> reward_pb2.ScoreResponse:
        if not self._judge.engine.is_running:
            raise _Refused(grpc.StatusCode.UNAVAILABLE, ENGINE_DOWN)
        try:
            valid = validate(request, self._judge.needs_reference, self._default_rubric, self._limits)
        except RequestError as error:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from error
        n_items = len(valid.items)
        if self._pending_items + n_items > self._max_pending_items:
            raise _Refused(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"server busy: {self._pending_items} items pending, a queue limit of "
                f"{self._max_pending_items} (--max-pending-items); retry in {RETRY_PUSHBACK_MS} ms",
            )
        call["rubrics"] = [getattr(choice, "name", choice) for choice, _ in valid.selection]
        self._pending_items += n_items
        metrics.PENDING_ITEMS.set(self._pending_items)
        try:
            resolved = await self._judge.resolve(valid.choices)
            try:
                selections = scorer_selections(valid, resolved)
            except RequestError as error:
                raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from error
            outcomes = await self._judge.score(valid.items, selections, valid.options)
        finally:
            self._pending_items -= n_items
            metrics.PENDING_ITEMS.set(self._pending_items)
        if not self._judge.engine.is_running:
            raise _Refused(grpc.StatusCode.UNAVAILABLE, ENGINE_DOWN)
        call["failed"] = sum(1 for outcome in outcomes if outcome.failure)
        _record(outcomes)
        results = [_result(item_id, outcome) for item_id, outcome in zip(valid.ids, outcomes)]
        return reward_pb2.ScoreResponse(results=results, judge_model=self._judge.judge_model)

    async def PrepareRubrics(
        self, request: reward_pb2.PrepareRubricsRequest, context
    ) -> reward_pb2.PrepareRubricsResponse:
        try:
            rubrics = inline_rubrics(request.rubrics, self._limits)
            resolved = await self._judge.resolve(rubrics)
            unservable_rubrics(rubrics, resolved)
        except RequestError as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        return reward_pb2.PrepareRubricsResponse(rubrics=[_rubric_info(resolved[r].info()) for r in rubrics])

    async def GetInfo(self, request: reward_pb2.GetInfoRequest, context) -> reward_pb2.GetInfoResponse:
        return reward_pb2.GetInfoResponse(
            judge_model=self._judge.judge_model,
            engine_settings=self._engine_settings,
            rubrics=[_rubric_info(scorer.info()) for scorer in self._judge.scorers.values()],
            default_rubric=self._default_rubric,
            low_confidence_threshold=self._low_confidence_below,
            server_version=__version__,
        )


class _Refused(Exception):
    """The whole call is refused with this status."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _record(outcomes: list[ItemOutcome]) -> None:
    for outcome in outcomes:
        metrics.ITEMS.labels(outcome.failure.code if outcome.failure else "OK").inc()
        metrics.SCORE_CLAIMS_REMOVED.inc(outcome.score_claims_removed)
        for item_score in outcome.scores:
            metrics.LABEL_MASS.labels(item_score.scorer.name).observe(item_score.score.estimate.label_mass)


def _result(item_id: str, outcome: ItemOutcome) -> reward_pb2.ItemResult:
    result = reward_pb2.ItemResult(
        id=item_id, scores=[_score(s) for s in outcome.scores], score_claims_removed=outcome.score_claims_removed
    )
    if outcome.failure is None:
        result.reward = outcome.reward
    else:
        result.error.CopyFrom(
            reward_pb2.ItemError(
                code=reward_pb2.ErrorCode.Value(f"ERROR_CODE_{outcome.failure.code}"),
                message=outcome.failure.message,
                field=outcome.failure.field,
            )
        )
    return result


def _score(item_score: ItemScore) -> reward_pb2.RubricScore:
    scorer, score = item_score.scorer, item_score.score
    estimate = score.estimate
    return reward_pb2.RubricScore(
        rubric=scorer.name,
        expected_score=estimate.expected_score,
        reward=estimate.reward,
        distribution=[
            reward_pb2.LabelProbability(label=label, value=float(label), probability=p)
            for label, p in estimate.distribution.items()
        ],
        label_mass=estimate.label_mass,
        low_confidence=estimate.low_confidence,
        top_label=estimate.top_label,
        mode=_MODES.get(score.mode, reward_pb2.SCORING_MODE_UNSPECIFIED),
        kind=_KINDS[scorer.kind],
        content_hash=scorer.content_hash,
        mean_logprob=score.mean_logprob,
        tokens_read=score.tokens_read,
        rationale=score.rationale,
    )


def _rubric_info(info) -> reward_pb2.RubricInfo:
    fields = dataclasses.asdict(info)
    fields["kind"] = _KINDS[info.kind]
    return reward_pb2.RubricInfo(**fields)
