"""The reward model's vLLM engine: a second AsyncLLM, on vLLM's pooling runner, read with token ids.

A sequence-classification checkpoint (`*ForSequenceClassification`) runs under vLLM's
`classify` task: the last token's hidden state through the model's score head. vLLM
applies the head's activation (a sigmoid or softmax) unless told not to; we ask for the
logits (`use_activation=False`), so a Bradley-Terry reward model's score is the number it
was trained to produce. The prompts go in as the judge's do (vllm_engine.engine_input),
with the judge's engine defaults for the platform (defaults.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from typing import Any

from geval_server.engine.defaults import classifier_defaults
from geval_server.engine.vllm_engine import AsyncLLMDriver, engine_input, platform
from geval_server.metrics import ENGINE_CANCELLED

log = logging.getLogger(__name__)


@functools.cache
def _raw_logits():
    """The request for a classifier's raw outputs, made once and copied per read."""
    from vllm import PoolingParams

    return PoolingParams(task="classify", use_activation=False)


class VllmClassifier(AsyncLLMDriver):
    """The classifier engine (protocol.ClassifierEngine) on vLLM's AsyncLLM with the pooling runner."""

    role = "the reward model"

    def __init__(self, model: str, engine_args: dict[str, Any], platform_name: str | None = None) -> None:
        """engine_args: the `AsyncEngineArgs` fields for this engine (defaults.split_memory);
        ours fill the rest, as for the judge."""
        super().__init__(model, classifier_defaults(engine_args, platform_name or platform()), request_prefix="rm-")

    async def classify(self, prompts: Sequence[list[int]]) -> list[list[float] | BaseException]:
        """Per prompt, its heads' logits (float64 of the engine's numbers, exact)."""
        return await asyncio.gather(*(self._read(ids) for ids in prompts), return_exceptions=True)

    async def _read(self, prompt_ids: list[int]) -> list[float]:
        final = None
        try:
            async for output in self._engine.encode(engine_input(prompt_ids), _raw_logits().clone(),
                                                    request_id=next(self._request_ids)):
                final = output
        except asyncio.CancelledError:
            ENGINE_CANCELLED.inc()  # vLLM's encode aborts the request on cancellation
            raise
        return [float(value) for value in final.outputs.data.tolist()]
