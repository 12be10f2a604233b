"""The RewardService servicer: converts a request (wire.py), has the judge score it,
answers with the reply wire.py builds. Each call is logged once, by calls.CallInterceptor."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import uuid

import grpc
from geval_client.pb import reward_pb2, reward_pb2_grpc

from geval_server import __version__, metrics
from geval_server.api.calls import call_record
from geval_server.api.wire import (
    Limits,
    RequestError,
    bound_summary,
    group_result,
    item_result,
    rubric_info,
    rubrics_to_prepare,
    validate,
    validate_groups,
)
from geval_server.judge.inputs import UnservableRubric
from geval_server.judge.judge import Judge
from geval_server.judge.outcomes import BoundSummary, ItemOutcome, bound_summaries

log = logging.getLogger(__name__)

# In-process engines: the server exits and a supervisor restarts it; a remote judge: the
# server answers again once the remote is back.
ENGINE_DOWN = "the judge engine is down (restarting, or a remote judge server unreachable); retry"
RETRY_PUSHBACK_MS = 1000

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
        return await self._answer(self._score, request, context, items=len(request.items))

    async def ScoreGroups(self, request: reward_pb2.ScoreGroupsRequest, context) -> reward_pb2.ScoreGroupsResponse:
        return await self._answer(self._score_groups, request, context, groups=len(request.groups))

    async def _answer(self, handle, request, context, **counts):
        """One scoring call: `handle(request, record)` answers it, or its refusal or a bug
        ends the call with a status (RESOURCE_EXHAUSTED with gRPC's retry pushback hint)."""
        record = call_record()
        record.update(call_id=uuid.uuid4().hex[:12], **counts)
        try:
            return await handle(request, record)
        except _Refused as refused:
            code, message = refused.code, refused.message
        except asyncio.CancelledError:
            raise  # client cancelled or deadline passed: engine requests aborted
        except Exception as error:  # a bug: answered and logged as what it is, never as OK
            code, message = grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}: {error}"
            log.exception("call %s failed", record["call_id"])
        pushback = (("grpc-retry-pushback-ms", str(RETRY_PUSHBACK_MS)),)
        await context.abort(
            code, message, trailing_metadata=pushback if code is grpc.StatusCode.RESOURCE_EXHAUSTED else ()
        )

    async def _score(self, request: reward_pb2.ScoreRequest, record: dict) -> reward_pb2.ScoreResponse:
        valid = self._checked(validate, request)
        async with self._admitted(len(valid.items), valid.selection, record):
            outcomes = await self._judge.score_request(valid)
        record["failed"] = sum(1 for outcome in outcomes if outcome.failure)
        bound = bound_summaries(outcomes)
        _count(outcomes, bound)
        return reward_pb2.ScoreResponse(results=[item_result(item_id, outcome)
                                                 for item_id, outcome in zip(valid.ids, outcomes)],
                                        judge_model=self._judge.judge_model,
                                        bound=[bound_summary(summary) for summary in bound])

    async def _score_groups(self, request: reward_pb2.ScoreGroupsRequest, record: dict):
        valid = self._checked(validate_groups, request)
        n_items = sum(len(group.completions) for group in request.groups)
        async with self._admitted(n_items, valid.selection, record):
            results = await self._judge.score_groups(valid)
        record["failed"] = sum(1 for result in results if result.failure)
        metrics.ITEMS_GATED.inc(sum(sum(result.gated) for result in results))
        return reward_pb2.ScoreGroupsResponse(
            results=[group_result(group_id, result) for group_id, result in zip(valid.ids, results)],
            judge_model=self._judge.judge_model,
        )

    def _checked(self, validate_request, request):
        """The request checked (validate or validate_groups), once the engine is known to be up."""
        if not self._judge.running:
            raise _Refused(grpc.StatusCode.UNAVAILABLE, ENGINE_DOWN)
        try:
            return validate_request(request, self._judge.needs_reference, self._default_rubric, self._limits)
        except RequestError as error:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from error

    @contextlib.asynccontextmanager
    async def _admitted(self, n_items: int, selection, record: dict):
        """The call's items counted in while the judge scores them; a rubric it cannot read
        refuses the call, and an engine that died meanwhile makes the answer UNAVAILABLE."""
        self._admit(n_items)
        record["rubrics"] = [getattr(choice, "name", choice) for choice, _ in selection]
        try:
            yield
        except UnservableRubric as error:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from error
        except Exception as error:  # an engine down mid-call (a caller's rubric being prepared on it)
            if self._judge.running:
                raise
            raise _Refused(grpc.StatusCode.UNAVAILABLE, ENGINE_DOWN) from error
        finally:
            self._release(n_items)
        if not self._judge.running:
            raise _Refused(grpc.StatusCode.UNAVAILABLE, ENGINE_DOWN)

    def _admit(self, n_items: int) -> None:
        """Counts items in, or refuses the call when the queue is full."""
        if self._pending_items + n_items > self._max_pending_items:
            raise _Refused(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"server busy: {self._pending_items} items pending, a queue limit of "
                f"{self._max_pending_items} (--max-pending-items); retry in {RETRY_PUSHBACK_MS} ms",
            )
        self._pending_items += n_items
        metrics.PENDING_ITEMS.set(self._pending_items)

    def _release(self, n_items: int) -> None:
        self._pending_items -= n_items
        metrics.PENDING_ITEMS.set(self._pending_items)

    async def PrepareRubrics(
        self, request: reward_pb2.PrepareRubricsRequest, context
    ) -> reward_pb2.PrepareRubricsResponse:
        try:
            infos = await self._judge.prepare(rubrics_to_prepare(request, self._judge.needs_reference, self._limits))
        except (RequestError, UnservableRubric) as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        return reward_pb2.PrepareRubricsResponse(rubrics=[rubric_info(info) for info in infos])

    async def GetInfo(self, request: reward_pb2.GetInfoRequest, context) -> reward_pb2.GetInfoResponse:
        settings = dict(self._engine_settings)
        counts = getattr(self._judge.engine, "prefix_cache_counts", None)  # engines that count their cache's hits
        if counts is not None:
            read, hit = counts()
            settings.update(prefix_cache_read_tokens=str(read), prefix_cache_hit_tokens=str(hit))
        return reward_pb2.GetInfoResponse(
            judge_model=self._judge.judge_model,
            engine_settings=settings,
            rubrics=[rubric_info(scorer.info()) for scorer in self._judge.scorers.values()],
            default_rubric=self._default_rubric,
            low_confidence_threshold=self._low_confidence_below,
            server_version=__version__,
        )


class _Refused(Exception):
    """The whole call is refused with this status."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _count(outcomes: list[ItemOutcome], bound: list[BoundSummary]) -> None:
    """A call's outcomes into the metrics, each labelled metric looked up once per label:
    a lookup per item and score was 16 us per item with 4 rubrics, against 6."""
    outcomes_by_code = collections.Counter(outcome.failure.code if outcome.failure else "OK" for outcome in outcomes)
    for code, count in outcomes_by_code.items():
        metrics.ITEMS.labels(code).inc(count)
    metrics.SCORE_CLAIMS_REMOVED.inc(sum(outcome.score_claims_removed for outcome in outcomes))
    metrics.ITEMS_GATED.inc(sum(outcome.gated for outcome in outcomes))
    for summary in bound:
        metrics.BOUND_ITEMS.labels(summary.rubric).inc(summary.items)
        metrics.BOUND_READ_TWICE.labels(summary.rubric).inc(summary.read_twice)
        metrics.BOUND_LOWERED.labels(summary.rubric).inc(summary.lowered)
        metrics.BOUND_GAP.labels(summary.rubric).inc(summary.gap_sum)
