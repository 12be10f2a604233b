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
import itertools
import logging
import os
import uuid
from collections.abc import Sequence
from typing import Any

from geval_server.engine.defaults import classifier_defaults
from geval_server.engine.vllm_engine import engine_input, platform
from geval_server.metrics import ENGINE_CANCELLED

log = logging.getLogger(__name__)


@functools.cache
def _raw_logits():
    """The request for a classifier's raw outputs, made once and copied per read."""
    from vllm import PoolingParams

    return PoolingParams(task="classify", use_activation=False)


class VllmClassifier:
    """The classifier engine (protocol.py) on vLLM's AsyncLLM with the pooling runner."""

    def __init__(self, model: str, engine_args: dict[str, Any], platform_name: str | None = None) -> None:
        """engine_args: the `AsyncEngineArgs` fields for this engine (defaults.split_memory);
        ours fill the rest, as for the judge."""
        self.model = model
        chosen = classifier_defaults(engine_args, platform_name or platform())
        self.settings: dict[str, Any] = chosen.settings
        self.dtype_reason = chosen.dtype_reason
        self.dtype: str | None = None
        self.environment = {name: os.environ.setdefault(name, value) for name, value in chosen.environment.items()}
        self._engine = None
        self._request_ids = map(f"rm-{uuid.uuid4().hex[:12]}-{{}}".format, itertools.count())

    def start(self) -> None:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        log.info("starting the reward model's vLLM engine for %s with %s", self.model, self.settings)
        self._engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=self.model, **self.settings))
        self.max_model_len = self._engine.model_config.max_model_len
        self.dtype = str(self._engine.model_config.dtype).removeprefix("torch.")
        log.info("the reward model computes in %s: %s", self.dtype, self.dtype_reason)

    def shutdown(self) -> None:
        if self._engine is not None:
            self._engine.shutdown()
            self._engine = None

    @property
    def is_running(self) -> bool:
        return self._engine is not None and not self._engine.errored

    def requests_in_flight(self) -> int:
        if self._engine is None:
            return 0
        return self._engine.output_processor.get_num_unfinished_requests()

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
