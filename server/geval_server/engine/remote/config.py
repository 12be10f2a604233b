"""What `serve --judge-url` takes: the remote servers, how a label is read there, and the
client's limits. Light (no HTTP library), so the command line imports it cheaply."""

from __future__ import annotations

from dataclasses import dataclass

# How a score label's log-probability is read on the remote (docs/serving.md#a-remote-judge):
# token-ids: vLLM's `logprob_token_ids`, the given tokens' exact values in one request per slot;
# prompt-logprobs: the prompt followed by each label token, its last prompt log-probability:
#   exact on any server with vLLM's `prompt_logprobs`, one full prefill per label token;
# top-k: the k most likely tokens; a label outside them counts 0 (its mass is at most the k-th's);
# auto: token-ids where the server honours them, else top-k.
READS = ("auto", "token-ids", "prompt-logprobs", "top-k")
# vLLM's default --max-logprobs: the largest k a vLLM server gives unless started with more.
DEFAULT_TOP_K = 20
# Connections to each remote: a scoring call puts one request per (item, rubric) in flight, and
# the remote batches what arrives together, so a bounded pool of many keeps its batches full.
DEFAULT_MAX_CONNECTIONS = 128
# A label read is one prefill; a reasoning read writes up to a few hundred tokens. A request
# past this is retried, as a remote that answers 429 or 5xx is.
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_RETRIES = 3
API_KEY_ENV = "GEVAL_JUDGE_API_KEY"


@dataclass(frozen=True)
class RemoteConfig:
    """serve --judge-url and its flags."""

    urls: tuple[str, ...]  # each an OpenAI-compatible base URL, ending in /v1
    served_model: str  # the model name the remotes serve the judge under
    api_key: str | None = None  # sent as a bearer token; from a file or the environment only
    read: str = "auto"
    top_k: int = DEFAULT_TOP_K
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
