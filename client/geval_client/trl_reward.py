"""Reward functions for TRL's GRPOTrainer and RLOOTrainer, backed by the server.

    from geval_client import GEvalReward
    reward = GEvalReward("judge-host:50051", rubrics={"summeval-coherence": 1, "summeval-relevance": 2})
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], ...)

TRL calls `reward(prompts=..., completions=..., completion_ids=..., **columns)`
with every other dataset column as a keyword, plus `log_metric`, which this
uses for the diagnostics in diagnostics.py (logged as `<name>/<metric>`).
One call is one Score RPC. Nothing here imports trl: the same callables serve
any training loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from .client import DEFAULT_TARGET, AsyncRewardClient, RewardClient
from .diagnostics import batch_metrics
from .pb import reward_pb2
from .requests import Rubrics
from .retry import RetryPolicy
from .reward_batch import RewardBatch, build_batch, rewards_of
from .transport import Targets, TLSOptions, channel_spec

log = logging.getLogger(__name__)


class _GEvalRewardBase:
    """server: as RewardClient's target (one address, a list, or dns:///name:port).
    rubrics: a name, a list of names, or {name: weight}; the reward is the weighted mean.
    reference_column: dataset column with the human reference, passed to rubrics that
    use one and, with score_references, also scored to measure self-preference.
    source_column: dataset column the judge reads as the input instead of the policy's
    prompt (e.g. the bare article when the prompt wraps it in instructions).
    sampling_n: score by sampling n judgements instead of log-probabilities.
    name: TRL's name for this reward in its logs (`rewards/<name>/mean`).
    timeout, retry, tls, token: as RewardClient's.
    """

    def __init__(
        self,
        server: Targets = DEFAULT_TARGET,
        rubrics: Rubrics = None,
        *,
        reference_column: str | None = None,
        source_column: str | None = None,
        score_references: bool = True,
        sampling_n: int | None = None,
        name: str = "geval",
        timeout: float = 300.0,
        retry: RetryPolicy = RetryPolicy(),
        tls: TLSOptions | None = None,
        token: str | None = None,
    ) -> None:
        self.__name__ = name
        self.rubrics = rubrics
        self.reference_column = reference_column
        self.source_column = source_column
        self.score_references = score_references
        self.sampling_n = sampling_n
        self._client_args = dict(target=server, timeout=timeout, retry=retry, tls=tls, token=token)
        self.last_metrics: dict[str, float] = {}

    def _batch(self, prompts, completions, completion_ids, columns) -> RewardBatch:
        return build_batch(
            prompts, completions, completion_ids, columns,
            source_column=self.source_column,
            reference_column=self.reference_column,
            score_references=self.score_references,
        )

    def _finish(
        self, batch: RewardBatch, results: Sequence[reward_pb2.ItemResult], latency_s: float, columns: dict
    ) -> list[float | None]:
        rewards = rewards_of(results, batch.completions)
        failed = [r for r in results[: batch.completions] if r.HasField("error")]
        if failed:
            log.warning(
                "%s: %d of %d completions got no reward (None); first: %s",
                self.__name__, len(failed), batch.completions, failed[0].error.message,
            )
        self.last_metrics = batch_metrics(batch, results, latency_s)
        log_metric = columns.get("log_metric")
        if log_metric is not None:
            for key, value in self.last_metrics.items():
                log_metric(f"{self.__name__}/{key}", value)
        return rewards

    def __repr__(self) -> str:
        target = self._client_args["target"]
        return f"{type(self).__name__}(name={self.__name__!r}, server={target!r}, rubrics={self.rubrics!r})"


class GEvalReward(_GEvalRewardBase):
    """Blocking reward function (options: see _GEvalRewardBase)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client = RewardClient(**self._client_args)

    def __call__(self, prompts, completions, completion_ids=None, **columns) -> list[float | None]:
        batch = self._batch(prompts, completions, completion_ids, columns)
        started = time.perf_counter()
        results = self._client.score(batch.items, self.rubrics, self.sampling_n)
        return self._finish(batch, results, time.perf_counter() - started, columns)

    def close(self) -> None:
        self._client.close()


class AsyncGEvalReward(_GEvalRewardBase):
    """Coroutine reward function: TRL awaits it on its own event loop, concurrently
    with its other async rewards (options: see _GEvalRewardBase)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        channel_spec(self._client_args["target"], self._client_args["tls"])  # bad options fail here, not mid-training
        self._client: AsyncRewardClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, prompts, completions, completion_ids=None, **columns) -> list[float | None]:
        batch = self._batch(prompts, completions, completion_ids, columns)
        client = self._client_for_running_loop()
        started = time.perf_counter()
        results = await client.score(batch.items, self.rubrics, self.sampling_n)
        return self._finish(batch, results, time.perf_counter() - started, columns)

    def _client_for_running_loop(self) -> AsyncRewardClient:
        """An asyncio channel belongs to the loop it was opened in, so open it there."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = AsyncRewardClient(**self._client_args)
            self._loop = loop
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
