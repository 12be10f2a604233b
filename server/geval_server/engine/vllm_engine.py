"""The judge's vLLM engine: an AsyncLLM in this process, driven with token ids.

Every call is one engine request; callers put many in flight at once and vLLM
batches them (continuous batching, prefix caching).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import itertools
import logging
import os
import uuid
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from geval_server.engine.data_parallel import RankRouter, routed_ranks
from geval_server.engine.defaults import CPU, GPU, OTHER, EngineDefaults, engine_defaults
from geval_server.engine.prompt_logprobs import ComputedRead, fill_from_batch
from geval_server.engine.protocol import Generation
from geval_server.engine.read_memo import DEFAULT_SIZE, ReadMemo
from geval_server.metrics import ENGINE_CANCELLED, PROMPT_LOGPROBS_SINGLY, READ_MEMO_HITS

log = logging.getLogger(__name__)

# How long a shutdown waits for vLLM's engine process to end by itself before killing it.
# vLLM's own default, 5 s, is also how long that process waits for its workers
# (VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS), and the embedded judge's worker took about 5 s to
# exit on a loaded 2-core machine: the engine process was killed mid-teardown, its shared
# memory left to the resource tracker's "leaked shared_memory objects" warning at our exit.
# Measured with this: the engine process ended by itself 8 s after the signal. 20 s covers its
# worst case, the 5 s wait, vLLM's 4 s after a SIGTERM to the workers, and its own exit.
ENGINE_SHUTDOWN_TIMEOUT_S = 20.0


@functools.cache
def _vllm() -> SimpleNamespace:
    """vLLM's request types, imported once, on first use: importing vLLM takes seconds, which
    the CLI's other commands never spend, and an import statement in every request cost the
    frontend about 5 us each (benchmarks/bench_frontend.py)."""
    from vllm import SamplingParams
    from vllm.inputs.engine import tokens_input
    from vllm.sampling_params import MAX_LOGPROB_TOKEN_IDS, RequestOutputKind

    return SimpleNamespace(SamplingParams=SamplingParams, tokens_input=tokens_input,
                           MAX_LOGPROB_TOKEN_IDS=MAX_LOGPROB_TOKEN_IDS, RequestOutputKind=RequestOutputKind)


def engine_input(prompt_ids: list[int]):
    """A prompt of token ids in the form vLLM's renderer makes (a `TokensInput`): AsyncLLM takes
    it as it is, still checking its length and ids. A plain `TokensPrompt` goes through the
    renderer in a thread pool first (vLLM 0.32), which cost the frontend about 0.1 ms of CPU per
    request in thread hand-offs (benchmarks/bench_stack_cost.py)."""
    return _vllm().tokens_input(prompt_ids)


@functools.lru_cache(maxsize=64)
def _label_read_params(token_ids: tuple[int, ...]):
    """The request for the log-probabilities of `token_ids` after a prompt, made once per set of
    tokens and copied for each read: making one ran vLLM's checks every time (2.5 us against
    0.2 for the copy). The copy is shallow, as vLLM's own SamplingParams.clone() is for a request
    it may not deep-copy (skip_clone); what vLLM adds to it (the end-of-text token among the stop
    tokens) is the same for every request."""
    return _vllm().SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=list(token_ids), detokenize=False)


def platform() -> str:
    """The platform vLLM runs on here, as engine_defaults takes it: CPU, GPU (CUDA or ROCm) or OTHER."""
    from vllm.platforms import current_platform

    return CPU if current_platform.is_cpu() else GPU if current_platform.is_cuda_alike() else OTHER


class AsyncLLMDriver:
    """What both of the server's vLLM engines are (protocol.Engine): an AsyncLLM in this process,
    started with our defaults for the platform (defaults.py), stopped, watched."""

    role = "the judge"  # who computes, in the log
    recovers = False  # an AsyncLLM that died stays dead: the server exits to be restarted

    def __init__(self, model: str, chosen: EngineDefaults, request_prefix: str = "") -> None:
        self.model = model
        self.settings: dict[str, Any] = chosen.settings
        # Why the engine computes in its number format; `dtype` is the format it resolved (start).
        self.dtype_reason = chosen.dtype_reason
        self.dtype: str | None = None
        # The vLLM environment variables the engine runs with: ours where the user set none.
        self.environment = {name: os.environ.setdefault(name, value) for name, value in chosen.environment.items()}
        self._engine = None
        # Request ids: unique among this engine's requests (a uuid4 each cost 10 us of CPU).
        self._request_ids = map(f"{request_prefix}{uuid.uuid4().hex[:12]}-{{}}".format, itertools.count())

    def start(self) -> None:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        log.info("starting vLLM engine for %s (%s) with %s", self.model, self.role, self.settings)
        self._engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=self.model, **self.settings))
        self.max_model_len = self._engine.model_config.max_model_len
        self.dtype = str(self._engine.model_config.dtype).removeprefix("torch.")
        log.info("%s computes in %s: %s", self.role, self.dtype, self.dtype_reason)

    def shutdown(self) -> None:
        if self._engine is not None:
            self._engine.shutdown(timeout=ENGINE_SHUTDOWN_TIMEOUT_S)
            self._engine = None

    @property
    def is_running(self) -> bool:
        return self._engine is not None and not self._engine.errored

    def requests_in_flight(self) -> int:
        """Requests the engine holds now (its queue depth); 0 once aborted requests are dropped."""
        if self._engine is None:
            return 0
        return self._engine.output_processor.get_num_unfinished_requests()


class VllmEngine(AsyncLLMDriver):
    """The judge engine (protocol.JudgeEngine) on vLLM's AsyncLLM."""

    def __init__(self, model: str, engine_args: dict[str, Any], read_memo_size: int = DEFAULT_SIZE,
                 platform_name: str | None = None) -> None:
        """engine_args: the `AsyncEngineArgs` fields the user set; ours fill the rest (defaults.py).
        read_memo_size: slot reads kept, so a prompt read again gets the same answer (read_memo.py).
        platform_name: CPU, GPU or OTHER; vLLM's own platform when None."""
        super().__init__(model, engine_defaults(engine_args, platform_name or platform()))
        self._memo = ReadMemo(read_memo_size)
        self._router = RankRouter(1)  # which data-parallel rank reads a request (data_parallel.py)

    def start(self) -> None:
        super().start()
        self._router = RankRouter(routed_ranks(self._engine.vllm_config.parallel_config))
        if self._router.ranks > 1:
            log.info("data parallel over %d ranks: each prompt's reads go to one rank", self._router.ranks)

    @property
    def block_size(self) -> int:
        """Tokens per KV-cache block: prefix-cache hits come in whole blocks."""
        return self._engine.vllm_config.cache_config.block_size

    async def reset_prefix_cache(self) -> None:
        """Forgets every cached prefix, so a measurement starts from a cold cache."""
        await self._engine.reset_prefix_cache()

    async def _final_output(self, prompt_ids: list[int], params, affinity: str | None):
        """Runs one request to completion, on the data-parallel rank the router picks for its
        affinity (none with one rank: vLLM's own). FINAL_ONLY: with n > 1 a streamed output
        holds only the child that just finished, the final one holds all n."""
        vllm = _vllm()
        params.output_kind = vllm.RequestOutputKind.FINAL_ONLY
        # Every request's params are made for it alone, so vLLM need not deep-copy them
        # (`skip_clone`, as vLLM's own OpenAI server sets it): a copy per request saved.
        params.skip_clone = True
        final = None
        rank = self._router.take(affinity)
        try:
            async for output in self._engine.generate(
                engine_input(prompt_ids), params, request_id=next(self._request_ids),
                data_parallel_rank=rank,
            ):
                final = output
        except asyncio.CancelledError:
            ENGINE_CANCELLED.inc()  # vLLM's generate aborts the request on cancellation
            raise
        finally:
            self._router.give_back(rank)
        return final

    async def token_logprobs(
        self, prompt_ids: list[int], token_ids: list[int], *, affinity: str | None = None
    ) -> dict[int, float]:
        """Exact next-token log-probabilities of token_ids (not a top-k that can miss them).
        vLLM reads at most MAX_LOGPROB_TOKEN_IDS (128) per request; more (Gemma-4 has 257
        tokens that begin with a digit) take several requests on the same prompt, in flight
        together, so the prefix cache computes the prompt once. A read made before is answered
        from the read memo, the same numbers again; the answer is shared: read it, never change it."""
        key = self._memo.key(prompt_ids, token_ids)
        if (kept := self._memo.get(key)) is not None:
            READ_MEMO_HITS.inc()
            return kept
        most = _vllm().MAX_LOGPROB_TOKEN_IDS
        if len(token_ids) <= most:  # the usual case: one request, awaited without a task of its own
            return self._memo.keep(key, await self._chunk_logprobs(prompt_ids, token_ids, affinity))
        chunks = [token_ids[i:i + most] for i in range(0, len(token_ids), most)]
        answers = await asyncio.gather(*(self._chunk_logprobs(prompt_ids, chunk, affinity) for chunk in chunks))
        return self._memo.keep(key, {token_id: logprob for answer in answers for token_id, logprob in answer.items()})

    async def _chunk_logprobs(self, prompt_ids: list[int], token_ids: list[int], affinity: str | None
                              ) -> dict[int, float]:
        params = copy.copy(_label_read_params(tuple(token_ids)))
        output = await self._final_output(prompt_ids, params, affinity)
        slot = output.outputs[0].logprobs[0]
        return {token_id: slot[token_id].logprob for token_id in token_ids if token_id in slot}

    async def prompt_logprobs(
        self, reads: Sequence[tuple[list[int], int]], *, affinity: str | None = None
    ) -> list[list[float] | BaseException]:
        """Per (prompt_ids, tail): log p of each of the last `tail` tokens given every token
        before it; an exception in place of a read that failed.

        vLLM 0.32 skips reading the prefix cache for a request that asks for prompt
        log-probabilities unless told otherwise (SamplingParams.skip_reading_prefix_cache):
        it computes them only for the tokens it runs, and returns placeholders for positions
        read from the cache. We read the cache: the tail (a completion) comes last, so a group
        sharing its source keeps the source's cache hits. A hit that reaches past the tail's
        start (completions sharing an opening past a block boundary) leaves the first tail
        tokens missing; they are filled from the batch's other reads (prompt_logprobs.py),
        and what none computed is read as the next token after its own cached prefix, so only
        that position runs (re-running the prompt without the cache would compute the source
        again). All reads are in flight at once, so vLLM batches them.
        """
        answers = await asyncio.gather(*(self._computed_read(ids, tail, affinity) for ids, tail in reads),
                                       return_exceptions=True)
        computed = [answer for answer in answers if isinstance(answer, ComputedRead)]
        tails = fill_from_batch(computed)
        # What no read computed: one request per distinct prefix (the position's token last).
        holes = list(dict.fromkeys(tuple(read.ids[: read.start + offset + 1])
                                   for read, tail in zip(computed, tails)
                                   for offset, value in enumerate(tail) if value is None))
        singly = await asyncio.gather(*(self.token_logprobs(list(hole[:-1]), [hole[-1]], affinity=affinity)
                                        for hole in holes), return_exceptions=True)
        PROMPT_LOGPROBS_SINGLY.inc(len(holes))
        found = {hole: answer if isinstance(answer, BaseException) else answer[hole[-1]]
                 for hole, answer in zip(holes, singly)}
        filled = iter(tails)
        results: list[list[float] | BaseException] = []
        for answer in answers:
            if isinstance(answer, BaseException):
                results.append(answer)
                continue
            tail = [found[tuple(answer.ids[: answer.start + offset + 1])] if value is None else value
                    for offset, value in enumerate(next(filled))]
            results.append(next((v for v in tail if isinstance(v, BaseException)), tail))
        return results

    async def _computed_read(self, prompt_ids: list[int], tail: int, affinity: str | None) -> ComputedRead:
        """One request; the tail positions vLLM computed (the cache held the rest)."""
        if not 0 < tail < len(prompt_ids):
            raise ValueError(f"tail must be 1..{len(prompt_ids) - 1} tokens, got {tail}")
        start = len(prompt_ids) - tail
        params = _vllm().SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False,
                                        skip_reading_prefix_cache=False)
        output = await self._final_output(prompt_ids, params, affinity)
        # prompt_logprobs[i] holds the log-probability of prompt token i (None for i = 0),
        # computed for i > num_cached_tokens.
        first_computed = max(start, output.num_cached_tokens + 1)
        computed = [output.prompt_logprobs[i][prompt_ids[i]].logprob for i in range(first_computed, len(prompt_ids))]
        return ComputedRead(prompt_ids, start, first_computed, computed)

    async def sample(
        self, prompt_ids: list[int], n: int, temperature: float, max_tokens: int, seed: int | None = None, *,
        affinity: str | None = None,
    ) -> list[str]:
        params = _vllm().SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
        output = await self._final_output(prompt_ids, params, affinity)
        return [completion.text for completion in output.outputs]

    async def generate(
        self, prompt_ids: list[int], max_tokens: int, stop: Sequence[str] = (), temperature: float = 0.0, *,
        affinity: str | None = None,
    ) -> Generation:
        """One continuation (greedy at temperature 0), its text cut before the first stop string."""
        params = _vllm().SamplingParams(max_tokens=max_tokens, temperature=temperature, stop=list(stop))
        completion = (await self._final_output(prompt_ids, params, affinity)).outputs[0]
        return Generation(completion.text, list(completion.token_ids), completion.finish_reason == "length")

    async def generate_greedy(self, prompt_ids: list[int], max_tokens: int) -> str:
        return (await self.generate(prompt_ids, max_tokens)).text
