"""`serve --judge-url ...`: the flags of a judge on an OpenAI-compatible server, checked into
a RemoteConfig, each error naming its flag and the limit."""

from __future__ import annotations

import argparse
import os
import pathlib
from typing import Any
from urllib.parse import urlparse

from geval_server.engine.remote.config import (
    API_KEY_ENV,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    DEFAULT_TOP_K,
    READS,
    RemoteConfig,
)

# The engine flags that still mean something with a remote judge: the tokenizer prompts are
# built with here, and the context length where the remote does not report one. Every other
# engine flag configures an engine this server does not run.
LOCAL_ENGINE_FLAGS = ("tokenizer", "max_model_len")


def add_remote_flags(parser: argparse.ArgumentParser) -> None:
    remote = parser.add_argument_group(
        "remote-judge", "The judge on an OpenAI-compatible server you already run (vLLM, SGLang, a fleet behind a "
        "router): prompts are built here with MODEL's tokenizer (or --tokenizer) and read there over its "
        "completions endpoint (docs/serving.md#a-remote-judge).")
    remote.add_argument("--judge-url", action="append", default=[], metavar="URL",
                        help="the server's OpenAI base URL, e.g. http://127.0.0.1:8000/v1 (repeatable: reads are "
                             "spread over them, each prompt's on one, for its prefix cache)")
    remote.add_argument("--judge-model-name", metavar="NAME",
                        help="the model name the server serves the judge under (default: MODEL as given)")
    remote.add_argument("--judge-api-key-file", type=pathlib.Path, metavar="FILE",
                        help=f"a file holding the server's API key, sent as a bearer token (or set {API_KEY_ENV}; "
                             "never on the command line, which `ps` shows)")
    remote.add_argument("--judge-read", choices=READS, default="auto",
                        help="how a score label is read: token-ids (vLLM's logprob_token_ids: exact), "
                             "prompt-logprobs (exact on any server with prompt_logprobs, a prefill per label token), "
                             "top-k (a label outside the top k counts 0), auto (token-ids where served, else top-k)")
    remote.add_argument("--judge-top-k", type=int, default=DEFAULT_TOP_K, metavar="K",
                        help="with top-k reads, how many tokens the server returns per slot (at most its own "
                             "limit: vLLM's --max-logprobs, 20 unless raised)")
    remote.add_argument("--judge-max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS, metavar="N",
                        help="connections open to each server at most (requests beyond wait for one)")
    remote.add_argument("--judge-timeout-s", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help="one request's limit; past it the request is retried")
    remote.add_argument("--judge-retries", type=int, default=DEFAULT_RETRIES, metavar="N",
                        help="retries of a request the server answered 429 or 5xx or did not answer in time, "
                             "with exponential backoff")


def remote_config(args: argparse.Namespace, model: str, engine_args: dict[str, Any],
                  parser: argparse.ArgumentParser) -> RemoteConfig | None:
    """The remote judge's settings; None without --judge-url. `model`: the judge as given."""
    if not args.judge_url:
        given = [flag for flag in ("judge_model_name", "judge_api_key_file") if getattr(args, flag) is not None]
        if given:
            parser.error(f"--{given[0].replace('_', '-')} needs --judge-url")
        return None
    for url in args.judge_url:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            parser.error(f"--judge-url: {url!r} is not an http(s) URL such as http://127.0.0.1:8000/v1")
    engine_only = sorted(set(engine_args) - set(LOCAL_ENGINE_FLAGS))
    if engine_only:
        parser.error(f"--judge-url: the judge runs on the remote server, so engine flags "
                     f"{', '.join('--' + flag.replace('_', '-') for flag in engine_only)} apply there, not here "
                     f"(here: {', '.join('--' + flag.replace('_', '-') for flag in LOCAL_ENGINE_FLAGS)})")
    if args.judge_top_k < 1:
        parser.error(f"--judge-top-k: must be at least 1, got {args.judge_top_k}")
    if args.judge_max_connections < 1:
        parser.error(f"--judge-max-connections: must be at least 1, got {args.judge_max_connections}")
    if not args.judge_timeout_s > 0:
        parser.error(f"--judge-timeout-s: must be positive, got {args.judge_timeout_s}")
    if args.judge_retries < 0:
        parser.error(f"--judge-retries: must be 0 or more, got {args.judge_retries}")
    return RemoteConfig(
        urls=tuple(dict.fromkeys(url.rstrip("/") for url in args.judge_url)),
        served_model=args.judge_model_name or model, api_key=_api_key(args.judge_api_key_file, parser),
        read=args.judge_read, top_k=args.judge_top_k, max_connections=args.judge_max_connections,
        timeout_s=args.judge_timeout_s, retries=args.judge_retries,
    )


def _api_key(path: pathlib.Path | None, parser: argparse.ArgumentParser) -> str | None:
    """The key from the file or the environment; both set and different is an error naming both."""
    from_env = os.environ.get(API_KEY_ENV) or None
    if path is None:
        return from_env
    try:
        from_file = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        parser.error(f"--judge-api-key-file: {error}")
    if not from_file:
        parser.error(f"--judge-api-key-file: {path} is empty")
    if from_env is not None and from_env != from_file:
        parser.error(f"--judge-api-key-file and {API_KEY_ENV} give different keys; set one of them")
    return from_file
