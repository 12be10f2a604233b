"""The completions requests a remote judge is read with, and their answers read back: pure,
no I/O. Prompts go as token ids, so the remote reads exactly the ids built here; tokens come
back as `token_id:N` (vLLM's return_tokens_as_token_ids), never as text that two tokens can
share (` 4` and `4` after byte-level decoding)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TOKEN_ID = "token_id:"
# vLLM's MAX_LOGPROB_TOKEN_IDS: the most tokens one request's logprob_token_ids may name.
MAX_TOKEN_IDS = 128
# The most stop strings a request may carry: OpenAI's limit, vLLM's default VLLM_MAX_STOP_STRINGS
# (a request with more is refused). Further ones are applied here (generation_cut).
MAX_STOP_STRINGS = 4


class AnswerError(ValueError):
    """The remote answered 200 with a body that lacks what was asked for."""


def token_ids_read(model: str, prompt_ids: list[int], token_ids: Sequence[int]) -> dict[str, Any]:
    """The exact log-probabilities of token_ids after the prompt (vLLM's logprob_token_ids,
    which needs `logprobs` set, any value)."""
    return {"model": model, "prompt": prompt_ids, "max_tokens": 1, "temperature": 0.0, "logprobs": 1,
            "logprob_token_ids": list(token_ids), "return_tokens_as_token_ids": True}


def top_k_read(model: str, prompt_ids: list[int], k: int) -> dict[str, Any]:
    return {"model": model, "prompt": prompt_ids, "max_tokens": 1, "temperature": 0.0, "logprobs": k,
            "return_tokens_as_token_ids": True}


def slot_answer(body: dict[str, Any], token_ids: Sequence[int]) -> dict[int, float]:
    """token_ids' log-probabilities at the slot, from a token-ids or top-k read's answer; a
    token the answer does not hold is left out (probability 0, as the engine contract says)."""
    try:
        (top,) = body["choices"][0]["logprobs"]["top_logprobs"][:1]
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise AnswerError(f"no top_logprobs at the slot in the answer: {str(body)[:200]}") from error
    by_id = {_token_id(token): logprob for token, logprob in top.items()}
    return {token_id: by_id[token_id] for token_id in token_ids if token_id in by_id}


def names_token_ids(body: dict[str, Any]) -> bool:
    """Whether the answer names its slot's tokens by id (`token_id:N`), as asked."""
    return all(token.startswith(TOKEN_ID) for token in body["choices"][0]["logprobs"]["top_logprobs"][0])


def prompt_logprobs_read(model: str, prompt_ids: list[int]) -> dict[str, Any]:
    """Log p of every prompt token given those before it (vLLM's prompt_logprobs; 0: the
    prompt's own token only). vLLM computes every position of such a request, reading no
    prefix cache, so no position comes back as a cache placeholder."""
    return {"model": model, "prompt": prompt_ids, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}


def prompt_answer(body: dict[str, Any], prompt_ids: Sequence[int], tail: int) -> list[float]:
    """log p of each of the last `tail` prompt tokens."""
    try:
        positions = body["choices"][0]["prompt_logprobs"]
        start = len(prompt_ids) - tail
        return [positions[i][str(prompt_ids[i])]["logprob"] for i in range(start, len(prompt_ids))]
    except (KeyError, IndexError, TypeError) as error:
        raise AnswerError(f"no prompt_logprobs for the prompt's tokens in the answer: {str(body)[:200]}") from error


def sample_request(model: str, prompt_ids: list[int], n: int, temperature: float, max_tokens: int,
                   seed: int | None) -> dict[str, Any]:
    body = {"model": model, "prompt": prompt_ids, "n": n, "temperature": temperature, "max_tokens": max_tokens}
    if seed is not None:
        body["seed"] = seed
    return body


def generate_request(model: str, prompt_ids: list[int], max_tokens: int, stop: Sequence[str],
                     temperature: float) -> dict[str, Any]:
    """One continuation with its token ids (vLLM's return_token_ids): reasoning mode keeps the
    rationale's tokens as generated."""
    return {"model": model, "prompt": prompt_ids, "max_tokens": max_tokens, "temperature": temperature,
            "stop": list(stop[:MAX_STOP_STRINGS]), "return_token_ids": True}


def texts(body: dict[str, Any]) -> list[str]:
    return [choice["text"] for choice in sorted(body["choices"], key=lambda choice: choice["index"])]


def generation(body: dict[str, Any], stop: Sequence[str]) -> tuple[str, list[int], bool]:
    """The text cut before the first of `stop`, every token generated, and whether it ran to
    max_tokens. The remote stopped at the first MAX_STOP_STRINGS of them; the text is cut here
    at the others, which the remote may have written past (those tokens are in the ids too)."""
    choice = body["choices"][0]
    if choice.get("token_ids") is None:
        raise AnswerError("the answer holds no token_ids (vLLM's return_token_ids): reasoning mode needs them")
    text, cut = choice["text"], choice.get("finish_reason") == "length"
    found = [at for at in (text.find(s) for s in stop[MAX_STOP_STRINGS:]) if at >= 0]
    if found:
        text, cut = text[:min(found)], False
    return text, list(choice["token_ids"]), cut


def _token_id(token: str) -> int | None:
    return int(token[len(TOKEN_ID):]) if token.startswith(TOKEN_ID) else None
