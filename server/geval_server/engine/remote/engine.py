"""RemoteEngine: the judge engine (protocol.JudgeEngine) on OpenAI-compatible servers the user
already runs, read over their completions endpoint with token-id prompts.

Every read is one HTTP request, all in flight at once within each remote's connection pool,
so the remote batches them as vLLM batches the in-process engine's. A prompt's reads go to one
remote (balance.py). What the remote offers is found at start-up by probing it: which label
read it honours (config.py's READS), whether it gives prompt log-probabilities (the
likelihood scorers need them), its context length. While every remote is down the engine is
not running (the server answers UNAVAILABLE and reports NOT_SERVING); a probe every second
notices a remote that returns, and the server serves again without a restart.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Sequence
from typing import Any

from geval_server.engine.protocol import EngineRequestError, Generation
from geval_server.engine.read_memo import DEFAULT_SIZE, ReadMemo
from geval_server.engine.remote import completions as api
from geval_server.engine.remote.balance import NoRemoteUp, Spread
from geval_server.engine.remote.client import Remote, RemoteDown
from geval_server.engine.remote.config import RemoteConfig
from geval_server.metrics import READ_MEMO_HITS

log = logging.getLogger(__name__)

HEALTH_INTERVAL_S = 1.0
# What the start-up probes read: any few ids are in every vocabulary. A server that ignores
# logprob_token_ids answers a read of three tokens with logprobs=1 with two at most.
PROBE_PROMPT = [1, 2, 3, 4]
PROBE_TOKENS = [0, 1, 2]
READ_NAMES = {"token-ids": "exact: vLLM's logprob_token_ids",
              "prompt-logprobs": "exact: the prompt and each label token, its prompt log-probability",
              "top-k": "the top {k}: a label outside them counts 0, its probability at most the k-th's"}


class RemoteEngine:
    role = "the judge"  # who computes, in the log
    recovers = True  # a remote that returns is served again

    def __init__(self, model: str, config: RemoteConfig, engine_args: dict[str, Any],
                 read_memo_size: int = DEFAULT_SIZE) -> None:
        """model: the judge's checkpoint here (its tokenizer builds the prompts); engine_args:
        the engine flags that apply here (flags.LOCAL_ENGINE_FLAGS)."""
        self.model = model
        self.config = config
        self.environment: dict[str, str] = {}
        self.dtype = "remote"
        self.dtype_reason = "the remote server's own number format (the OpenAI API does not report it)"
        self.max_model_len: int | None = engine_args.get("max_model_len")
        self.read = config.read
        # Why the remotes give no prompt log-probabilities; None where they do.
        self.prompt_logprobs_missing: str | None = None
        self.settings: dict[str, Any] = {}
        self._remotes = [Remote(url, config.api_key, config.max_connections, config.timeout_s, config.retries)
                         for url in config.urls]
        self._spread = Spread(len(self._remotes))
        self._memo = ReadMemo(read_memo_size)
        self._started = False
        self._watch: asyncio.Task | None = None

    def start(self) -> None:
        """Probes every remote (blocking, as the in-process engine's start blocks on its model
        load), then watches them from the running event loop; SystemExit naming the flag when
        no remote serves the judge as configured."""
        with concurrent.futures.ThreadPoolExecutor(1) as thread:  # start runs inside the server's event loop
            thread.submit(asyncio.run, self._connect()).result()
        self.settings = {
            "engine": "remote", "judge_urls": " ".join(self.config.urls), "served_model": self.config.served_model,
            "label_read": f"{self.read} ({READ_NAMES[self.read].format(k=self.config.top_k)})",
            "prompt_logprobs": self.prompt_logprobs_missing or "served",
            "max_connections_per_remote": self.config.max_connections, "timeout_s": self.config.timeout_s,
            "retries": self.config.retries,
            **({"top_k": self.config.top_k} if self.read == "top-k" else {}),
        }
        self._started = True
        self._watch = asyncio.get_running_loop().create_task(self._watch_remotes())
        log.info("the judge is %s on %s; label reads: %s", self.config.served_model, ", ".join(self.config.urls),
                 self.settings["label_read"])

    async def _connect(self) -> None:
        try:
            served = await asyncio.gather(*(remote.probe() for remote in self._remotes))
            up = [remote for remote, models in zip(self._remotes, served) if models is not None]
            if not up:
                raise SystemExit(f"geval-reward: --judge-url: no judge server answers at {', '.join(self.config.urls)}")
            lengths = []
            for remote, models in zip(self._remotes, served):
                if models is None:
                    continue
                listed = {model.get("id"): model for model in models.get("data", [])}
                if self.config.served_model not in listed:
                    raise SystemExit(f"geval-reward: --judge-model-name: {remote.url} does not serve "
                                     f"{self.config.served_model!r}; it serves {sorted(map(str, listed))}")
                lengths.append(listed[self.config.served_model].get("max_model_len"))
            if self.max_model_len is None:
                if None in lengths:
                    raise SystemExit("geval-reward: --max-model-len: a judge server does not report its context "
                                     "length (vLLM's /v1/models does); give it")
                self.max_model_len = min(lengths)
            for remote in up:
                await self._probe_reads(remote)
        finally:
            for remote in self._remotes:
                remote.close()  # its session belongs to this start-up loop

    async def _probe_reads(self, remote: Remote) -> None:
        """Which label read this remote honours, and whether it gives prompt log-probabilities."""
        model = self.config.served_model
        if self.read in ("auto", "token-ids"):
            answer = await remote.post("/completions", api.token_ids_read(model, PROBE_PROMPT, PROBE_TOKENS))
            if len(api.slot_answer(answer, PROBE_TOKENS)) == len(PROBE_TOKENS):
                self.read = "token-ids"
            elif self.read == "token-ids":  # asked for, or honoured by another remote
                raise SystemExit(f"geval-reward: --judge-read {self.config.read}: {remote.url} does not honour "
                                 "logprob_token_ids (vLLM's)" + ("" if self.config.read == "token-ids" else
                                                                 ", where another --judge-url does") +
                                 "; serve the judge alike on each, or give --judge-read top-k or prompt-logprobs")
            else:
                self.read = "top-k"
        if self.read == "top-k":
            try:
                answer = await remote.post("/completions", api.top_k_read(model, PROBE_PROMPT, self.config.top_k))
            except EngineRequestError as error:
                raise SystemExit(f"geval-reward: --judge-top-k {self.config.top_k}: {error} (a vLLM server "
                                 "gives up to its --max-logprobs)") from error
            if not api.names_token_ids(answer):
                raise SystemExit(f"geval-reward: --judge-url: {remote.url} names tokens by text, not by id "
                                 "(vLLM's return_tokens_as_token_ids); labels cannot be read exactly from text")
        try:
            answer = await remote.post("/completions", api.prompt_logprobs_read(model, PROBE_PROMPT))
            api.prompt_answer(answer, PROBE_PROMPT, len(PROBE_PROMPT) - 1)
        except (EngineRequestError, api.AnswerError) as error:
            self.prompt_logprobs_missing = f"{remote.url} gives no prompt log-probabilities: {error}"
        if self.read == "prompt-logprobs" and self.prompt_logprobs_missing:
            raise SystemExit(f"geval-reward: --judge-read prompt-logprobs: {self.prompt_logprobs_missing}")

    async def _watch_remotes(self) -> None:
        """Probes every remote each second: one down is seen as down without traffic, one back as up."""
        while True:
            await asyncio.gather(*(remote.probe() for remote in self._remotes))
            await asyncio.sleep(HEALTH_INTERVAL_S)

    def shutdown(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        for remote in self._remotes:
            remote.close()
        self._started = False

    @property
    def is_running(self) -> bool:
        return self._started and any(remote.up for remote in self._remotes)

    def requests_in_flight(self) -> int:
        return sum(self._spread.in_flight)

    async def _post(self, body: dict[str, Any], affinity: str | None) -> dict[str, Any]:
        """The answer from the remote the spread picks; a remote found down meanwhile passes
        the read on to another that is up."""
        while True:
            try:
                index = self._spread.take(affinity, [remote.up for remote in self._remotes])
            except NoRemoteUp as error:
                raise RemoteDown(str(error)) from None
            try:
                return await self._remotes[index].post("/completions", body)
            except RemoteDown:
                if not any(remote.up for remote in self._remotes):
                    raise
            finally:
                self._spread.give_back(index)

    async def reset_prefix_cache(self) -> None:
        """Forgets every remote's cached prefixes (vLLM offers it with VLLM_SERVER_DEV_MODE=1)."""
        await asyncio.gather(*(remote.reset_prefix_cache() for remote in self._remotes))

    async def token_logprobs(
        self, prompt_ids: list[int], token_ids: list[int], *, affinity: str | None = None
    ) -> dict[int, float]:
        """The log-probabilities of token_ids after the prompt, read as the engine was started
        to (self.read); a read made before is answered from the read memo, the same numbers."""
        key = self._memo.key(prompt_ids, token_ids)
        if (kept := self._memo.get(key)) is not None:
            READ_MEMO_HITS.inc()
            return kept
        return self._memo.keep(key, await self._label_read(prompt_ids, token_ids, affinity))

    async def _label_read(self, prompt_ids: list[int], token_ids: list[int], affinity: str | None
                          ) -> dict[int, float]:
        model = self.config.served_model
        if self.read == "top-k":  # one request: the k most likely tokens
            answer = await self._post(api.top_k_read(model, prompt_ids, self.config.top_k), affinity)
            return api.slot_answer(answer, token_ids)
        if self.read == "prompt-logprobs":  # one request per token: the prompt followed by it
            answers = await asyncio.gather(*(self._post(api.prompt_logprobs_read(model, prompt_ids + [token]),
                                                        affinity) for token in token_ids))
            return {token: api.prompt_answer(answer, prompt_ids + [token], 1)[0]
                    for token, answer in zip(token_ids, answers)}
        # token-ids: at most MAX_TOKEN_IDS per request (Gemma-4 has 257 tokens that begin with a
        # digit), the chunks in flight together on one remote, so its prefix cache computes the prompt once
        chunks = [token_ids[i:i + api.MAX_TOKEN_IDS] for i in range(0, len(token_ids), api.MAX_TOKEN_IDS)]
        answers = await asyncio.gather(*(self._post(api.token_ids_read(model, prompt_ids, chunk), affinity)
                                         for chunk in chunks))
        return {token: logprob for answer, chunk in zip(answers, chunks)
                for token, logprob in api.slot_answer(answer, chunk).items()}

    async def prompt_logprobs(
        self, reads: Sequence[tuple[list[int], int]], *, affinity: str | None = None
    ) -> list[list[float] | BaseException]:
        """Per (prompt_ids, tail): log p of each of the last `tail` tokens; all in flight at once."""
        return list(await asyncio.gather(*(self._prompt_read(ids, tail, affinity) for ids, tail in reads),
                                         return_exceptions=True))

    async def _prompt_read(self, prompt_ids: list[int], tail: int, affinity: str | None) -> list[float]:
        if not 0 < tail < len(prompt_ids):
            raise ValueError(f"tail must be 1..{len(prompt_ids) - 1} tokens, got {tail}")
        if self.prompt_logprobs_missing:
            raise EngineRequestError("FAILED_PRECONDITION", self.prompt_logprobs_missing)
        answer = await self._post(api.prompt_logprobs_read(self.config.served_model, prompt_ids), affinity)
        return api.prompt_answer(answer, prompt_ids, tail)

    async def sample(
        self, prompt_ids: list[int], n: int, temperature: float, max_tokens: int, seed: int | None = None, *,
        affinity: str | None = None,
    ) -> list[str]:
        body = api.sample_request(self.config.served_model, prompt_ids, n, temperature, max_tokens, seed)
        return api.texts(await self._post(body, affinity))

    async def generate(
        self, prompt_ids: list[int], max_tokens: int, stop: Sequence[str] = (), temperature: float = 0.0, *,
        affinity: str | None = None,
    ) -> Generation:
        """One continuation (greedy at temperature 0), its text cut before the first stop string."""
        body = api.generate_request(self.config.served_model, prompt_ids, max_tokens, stop, temperature)
        return Generation(*api.generation(await self._post(body, affinity), stop))

    async def generate_greedy(self, prompt_ids: list[int], max_tokens: int) -> str:
        return (await self.generate(prompt_ids, max_tokens)).text
