"""An engine that reads without a model: the judge engine (protocol.py) for measuring
everything around the model, and for simulating a fleet of replicas on one machine; it
classifies too (a classifier engine's `classify`), standing in for a reward model.

Each label read answers log-probabilities that are a function of the prompt's token ids
and the token (equal prompts, equal answers), after a modelled delay: `seconds_per_token`
for every prompt token its own prefix cache does not hold. The cache is modelled as vLLM's
is: whole blocks of `block_size` tokens, keyed by everything before them, the least
recently used dropped beyond `cache_blocks`; it is one cache, so a read's affinity (which
data-parallel rank reads it) is taken and ignored. With `serial`, reads compute one at a
time, so a replica's throughput is bounded as a busy accelerator's is (a fleet's replicas,
simulated); without it their delays overlap. Generation is not modelled: steps must be in
the rubrics, and reasoning and sampling modes are refused.
"""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from geval_server.engine.protocol import Generation

MAX_MODEL_LEN = 8192  # the embedded judge's


def label_logprob(prompt_key: int, token_id: int) -> float:
    """A log-probability in [log 1e-4, log 0.09]: a function of the prompt and the token, cheap to compute."""
    mixed = (prompt_key ^ (token_id * 0x9E3779B97F4A7C15)) & 0xFFFFFFFF
    return math.log((mixed % 900 + 1) / 10_000)


class NullEngine:
    role = "the null"  # who computes, in the log
    recovers = False

    def __init__(
        self,
        model: str,
        engine_args: dict[str, Any],
        read_memo_size: int = 0,
        *,
        seconds_per_token: float = 0.0,
        block_size: int = 32,
        cache_blocks: int = 1 << 16,
        serial: bool = False,
    ) -> None:
        """read_memo_size: taken for the same signature as the vLLM engine's; equal prompts
        already get equal answers."""
        self.model = model
        self.settings: dict[str, Any] = {"engine": "null", "seconds_per_token": seconds_per_token,
                                         "block_size": block_size, "serial": serial, **engine_args}
        self.environment: dict[str, str] = {}
        self.dtype: str | None = None
        self.dtype_reason = "the null engine computes nothing"
        self.max_model_len = MAX_MODEL_LEN
        self.seconds_per_token = seconds_per_token
        self.block_size = block_size
        self.cache_blocks = cache_blocks
        self._cache: OrderedDict[int, None] = OrderedDict()
        self._computing = asyncio.Lock() if serial else None
        self._running = False
        self._in_flight = 0
        self.prompt_tokens = 0  # every prompt token read
        self.cached_tokens = 0  # of which the modelled prefix cache held

    def start(self) -> None:
        self._running = True
        self.dtype = str(self.settings.get("dtype", "float32"))

    def shutdown(self) -> None:
        self._running = False

    @property
    def is_running(self) -> bool:
        return self._running

    def requests_in_flight(self) -> int:
        return self._in_flight

    async def reset_prefix_cache(self) -> None:
        self._cache.clear()

    @property
    def cache_hit_rate(self) -> float:
        """The share of prompt tokens the modelled prefix cache held."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def prefix_cache_counts(self) -> tuple[int, int]:
        """Prompt tokens read, and of them those the cache held, since start (GetInfo reports them)."""
        return self.prompt_tokens, self.cached_tokens

    def _computed_tokens(self, prompt_ids: Sequence[int]) -> int:
        """Tokens the read computes: those past the longest run of cached whole blocks. The
        blocks it fills are cached (vLLM caches full blocks only)."""
        blocks = len(prompt_ids) // self.block_size
        keys = [hash(tuple(prompt_ids[: (b + 1) * self.block_size])) for b in range(blocks)]
        hit = 0
        while hit < blocks and keys[hit] in self._cache:
            self._cache.move_to_end(keys[hit])
            hit += 1
        for key in keys[hit:]:
            self._cache[key] = None
        while len(self._cache) > self.cache_blocks:
            self._cache.popitem(last=False)
        cached = hit * self.block_size
        self.prompt_tokens += len(prompt_ids)
        self.cached_tokens += cached
        return len(prompt_ids) - cached

    async def _compute(self, prompt_ids: Sequence[int]) -> None:
        """The read's modelled time; one event-loop turn at least, as a real engine's request yields."""
        computed = self._computed_tokens(prompt_ids)
        self._in_flight += 1
        try:
            if self._computing is None:
                await asyncio.sleep(computed * self.seconds_per_token)
            else:
                async with self._computing:
                    await asyncio.sleep(computed * self.seconds_per_token)
        finally:
            self._in_flight -= 1

    async def token_logprobs(
        self, prompt_ids: list[int], token_ids: list[int], *, affinity: str | None = None
    ) -> dict[int, float]:
        await self._compute(prompt_ids)
        key = hash(tuple(prompt_ids))
        return {token_id: label_logprob(key, token_id) for token_id in token_ids}

    async def prompt_logprobs(
        self, reads: Sequence[tuple[list[int], int]], *, affinity: str | None = None
    ) -> list[list[float] | BaseException]:
        async def read(ids: list[int], tail: int) -> list[float]:
            await self._compute(ids)
            return [label_logprob(hash(tuple(ids[:i])), ids[i]) for i in range(len(ids) - tail, len(ids))]

        return list(await asyncio.gather(*(read(ids, tail) for ids, tail in reads), return_exceptions=True))

    async def classify(self, prompts: Sequence[list[int]]) -> list[list[float] | BaseException]:
        """The classifier engine's read (protocol.py), one head: a logit that is a function of the
        prompt's ids, after the modelled delay, so the null engine stands in for a reward model too."""
        async def read(ids: list[int]) -> list[float]:
            await self._compute(ids)
            return [label_logprob(hash(tuple(ids)), 0) + 5.0]

        return list(await asyncio.gather(*(read(ids) for ids in prompts), return_exceptions=True))

    async def sample(
        self, prompt_ids: list[int], n: int, temperature: float, max_tokens: int, seed: int | None = None, *,
        affinity: str | None = None,
    ) -> list[str]:
        raise NotImplementedError("the null engine reads; it does not sample")

    async def generate(
        self, prompt_ids: list[int], max_tokens: int, stop: Sequence[str] = (), temperature: float = 0.0, *,
        affinity: str | None = None,
    ) -> Generation:
        raise NotImplementedError("the null engine reads; it does not generate (give rubrics their steps)")

    async def generate_greedy(self, prompt_ids: list[int], max_tokens: int) -> str:
        return (await self.generate(prompt_ids, max_tokens)).text
