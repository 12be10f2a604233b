"""A process reward model's vLLM engine: an AsyncLLM on the pooling runner, read with token ids.

vLLM 0.32 serves `Qwen2ForProcessRewardModel` (Qwen2.5-Math-PRM's layout: a two-class head
on every token) with its STEP pooler: under the `token_classify` task it computes the head on
every position and returns the rows at the positions that hold the request's `step_tag_id`.
We ask for the logits (`use_activation=False`) and make the probability ourselves in float64,
so the numbers are the model's own; the tag id is set per request, so vLLM's default tag for
the architecture (151651, Qwen2.5-Math-PRM's `<extra_0>`) never applies to another vocabulary.
The engine is the reward model's (vllm_classifier.py) in everything else: the judge's
defaults for the platform on the pooling runner, its memory set aside by defaults.split_memory.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Any

from geval_server.engine.defaults import classifier_defaults
from geval_server.engine.vllm_engine import AsyncLLMDriver, engine_input, platform
from geval_server.metrics import ENGINE_CANCELLED


@functools.lru_cache(maxsize=8)
def _step_params(tag_id: int):
    """The request for the logits at a tag, made once per tag and copied per read."""
    from vllm import PoolingParams

    return PoolingParams(task="token_classify", use_activation=False, step_tag_id=tag_id)


class VllmStepScorer(AsyncLLMDriver):
    """The step scorer engine (protocol.StepScorerEngine) on vLLM's AsyncLLM with the pooling runner."""

    role = "the process reward model"

    def __init__(self, model: str, engine_args: dict[str, Any], platform_name: str | None = None) -> None:
        """engine_args: the `AsyncEngineArgs` fields for this engine (defaults.split_memory)."""
        super().__init__(model, classifier_defaults(engine_args, platform_name or platform()), request_prefix="prm-")

    async def step_logits(self, prompts: Sequence[list[int]], tag_id: int
                          ) -> list[list[list[float]] | BaseException]:
        """Per prompt, per occurrence of the tag, the classes' logits (float64 of the engine's numbers)."""
        return await asyncio.gather(*(self._read(ids, tag_id) for ids in prompts), return_exceptions=True)

    async def _read(self, prompt_ids: list[int], tag_id: int) -> list[list[float]]:
        final = None
        try:
            async for output in self._engine.encode(engine_input(prompt_ids), _step_params(tag_id).clone(),
                                                    request_id=next(self._request_ids)):
                final = output
        except asyncio.CancelledError:
            ENGINE_CANCELLED.inc()  # vLLM's encode aborts the request on cancellation
            raise
        return [[float(value) for value in row] for row in final.outputs.data.tolist()]
