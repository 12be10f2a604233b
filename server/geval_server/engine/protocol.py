"""What the server asks of a judge engine, of a classifier engine (a trained reward model
beside the judge) and of a step scorer (a process reward model beside it), and how a reward
names the engine behind it.

The server takes any object with these members: the vLLM drivers (vllm_engine.py,
vllm_classifier.py, vllm_process_reward.py) in production, or a judge on a remote
OpenAI-compatible server (remote/engine.py), the null engine (null_engine.py) where a
benchmark or a simulated fleet needs an engine that answers at once or after a modelled delay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Generation:
    text: str  # cut before a stop string
    token_ids: list[int]  # every token generated, a stop string's and an end-of-turn token's included
    cut: bool  # ran to max_tokens


class EngineRequestError(Exception):
    """One request the engine would not or could not read (a remote server refused it, or did
    not answer within its retries): the items it was for fail with `code`, a gRPC status name,
    and this message, which names why; the rest of the call is scored."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Engine(Protocol):
    """What the server starts, stops, watches and reports of any engine it runs."""

    model: str  # the checkpoint's path
    role: str  # what it serves, in the log: "the judge", "the reward model"
    # Whether it comes back by itself once down (a remote server that returns): the server then
    # reports NOT_SERVING and answers UNAVAILABLE meanwhile, and serves again when it is up. An
    # engine in this process that died does not; the server exits so a supervisor restarts it.
    recovers: bool
    settings: dict[str, Any]  # the engine arguments it runs with (GetInfo reports them)
    environment: dict[str, str]  # the engine's environment variables that shape its numbers and speed
    dtype: str | None  # the number format it computes in, once started
    dtype_reason: str
    max_model_len: int  # once started

    def start(self) -> None: ...

    def shutdown(self) -> None: ...

    @property
    def is_running(self) -> bool: ...

    def requests_in_flight(self) -> int: ...


class JudgeEngine(Engine, Protocol):
    """The judge: label probabilities at a slot, prompt log-probabilities, generations."""

    async def reset_prefix_cache(self) -> None: ...

    # Reads take `affinity`: the prompt of the item (or group) they are made for. With
    # several data-parallel ranks the reads sharing a key go to one rank, so its prefix cache
    # computes the prompt once (data_parallel.py); an engine with one cache may ignore it.

    async def token_logprobs(
        self, prompt_ids: list[int], token_ids: list[int], *, affinity: str | None = None
    ) -> dict[int, float]:
        """Exact next-token log-probabilities of token_ids after the prompt (a token the engine
        gives no value is left out)."""

    async def prompt_logprobs(
        self, reads: Sequence[tuple[list[int], int]], *, affinity: str | None = None
    ) -> list[list[float] | BaseException]:
        """Per (prompt_ids, tail): log p of each of the last `tail` tokens given every token before it."""

    async def sample(
        self, prompt_ids: list[int], n: int, temperature: float, max_tokens: int, seed: int | None = None, *,
        affinity: str | None = None,
    ) -> list[str]: ...

    async def generate(
        self, prompt_ids: list[int], max_tokens: int, stop: Sequence[str] = (), temperature: float = 0.0, *,
        affinity: str | None = None,
    ) -> Generation:
        """One continuation (greedy at temperature 0), its text cut before the first stop string."""

    async def generate_greedy(self, prompt_ids: list[int], max_tokens: int) -> str: ...


class ClassifierEngine(Engine, Protocol):
    """A sequence classifier read with token ids: each prompt's outputs (one per head, in the
    model's order) as the raw logits, no activation, so a Bradley-Terry reward model's score
    is its own number."""

    async def classify(self, prompts: Sequence[list[int]]) -> list[list[float] | BaseException]:
        """Per prompt (token ids), its heads' logits; an exception in place of a read that failed.
        All are in flight at once, so the engine batches them."""


class StepScorerEngine(Engine, Protocol):
    """A process reward model read with token ids: per prompt, the model's raw outputs (one
    per class, no activation) at every position that holds the step tag, in order, so the
    scorer reads each step's verdict at the tag it wrote after the step."""

    async def step_logits(self, prompts: Sequence[list[int]], tag_id: int
                          ) -> list[list[list[float]] | BaseException]:
        """Per prompt (token ids), per occurrence of tag_id in it, the classes' logits; an
        exception in place of a read that failed. All are in flight at once, so the engine
        batches them."""


def judge_identity(model: str, dtype: str) -> str:
    """What a reward's content hash names as its judge: the model and the number format it
    computed in, since the same checkpoint in bfloat16 and in float32 gives other rewards."""
    return f"{model} ({dtype})"
