"""`geval-reward serve`: the server's command line. The `geval-reward` command
(geval_reward/cli.py) sends `serve` here; `python -m geval_server.cli serve ...` runs
it directly, as the launcher does."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import pathlib
import sys
from typing import Any

from geval_client.transport import TOKEN_ENV, read_token

from geval_server.api.wire import Limits
from geval_server.config import ServeConfig
from geval_server.defences.chain import DefenceSettings
from geval_server.engine.defaults import defaults_line
from geval_server.engine.embedded_model import EMBEDDED_MODEL
from geval_server.engine.flags import add_engine_flags, given_engine_flags
from geval_server.engine.remote.flags import add_remote_flags, remote_config
from geval_server.scorers.registry import add_flags as add_kind_flags
from geval_server.scorers.registry import kind_settings

SERVE_EPILOG = (
    "Flags are listed by group: --help=all shows every flag, --help=<group> one group "
    "(for example --help=access, --help=CacheConfig), --help=<word> the flags matching it. "
    "The engine groups are vLLM's own flags, as `vllm serve` takes them. Where an engine flag is left out, "
    f"geval-reward's defaults apply, {defaults_line()} (--help=all marks each flag it sets)."
)


def _serve_parser():
    """The `serve` flags: ours, then vLLM's engine flags. vLLM's parser class, so that
    vLLM's spellings (`--max_model_len`, `--compilation-config.mode 3`, `-O3`) carry over."""
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    serve = FlexibleArgumentParser(prog="geval-reward serve", description="Serve rewards over gRPC.",
                                   epilog=SERVE_EPILOG)
    serve.add_argument("model_tag", nargs="?", metavar="MODEL",
                       help=f"the judge: a local checkpoint path or hub id, as in `vllm serve MODEL` "
                            f"(or --model); default: the embedded {EMBEDDED_MODEL}, offline; none with --no-judge "
                            "(a reward model served alone)")
    server = serve.add_argument_group("server", "Where and what geval-reward serves.")
    server.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    server.add_argument("--port", type=int, default=ServeConfig.port, help="0 picks a free port")
    server.add_argument("--rubrics", type=pathlib.Path, action="append", default=[],
                        help="a rubric TOML file or a directory of them, added to the presets (repeatable)")
    server.add_argument("--default-rubric", default=ServeConfig.default_rubric,
                        help="the rubric of a call that names none (unset: the judge's overall-quality; a reward "
                             "model's own when it is served without a judge)")
    server.add_argument("--low-confidence-below", type=float, default=ServeConfig.low_confidence_below,
                        help="flag a score whose label mass is under this")
    server.add_argument("--demo", action="store_true", help="score a few example pairs once ready")
    server.add_argument("--keep-score-claims", dest="remove_score_claims", action="store_false",
                        help="judge completions as written: do not remove score claims such as 'Coherence: 5' "
                             "(on by default: small judges copy them)")
    server.add_argument("--no-masked-read-bound", dest="masked_read_bound", action="store_false",
                        help="do not read a completion with a numeral a second time with its numerals masked "
                             "(on by default: the reward is the lower read, so a score claim in any spelling can "
                             "only lower it; costs one more read per such completion)")
    server.add_argument("--no-judge", dest="judge", action="store_false",
                        help="run no judge (MODEL is not started, and nothing that reads the judge is served: "
                             "G-Eval and likelihood rubrics are refused); serve a reward model alone, or rules")
    add_kind_flags(serve)
    add_remote_flags(serve)
    access = serve.add_argument_group("access", "Bearer tokens and TLS.")
    access.add_argument("--api-key", nargs="+", metavar="KEY",
                        help="require `authorization: Bearer <key>` with one of these keys on every call but "
                             "health checks, as `vllm serve --api-key` (or set VLLM_API_KEY); the command line "
                             "is visible in `ps`, so prefer --auth-token-file or an environment variable")
    access.add_argument("--auth-token-file", type=pathlib.Path,
                        help=f"the same, the key being this file's content (or set {TOKEN_ENV})")
    access.add_argument("--tls-cert", type=pathlib.Path, help="PEM certificate chain; serve TLS")
    access.add_argument("--tls-key", type=pathlib.Path, help="PEM private key for --tls-cert")
    limits = serve.add_argument_group("limits", "Request limits and operations.")
    limits.add_argument("--max-items-per-request", type=int, default=Limits.max_items)
    limits.add_argument("--max-field-chars", type=int, default=Limits.max_field_chars,
                        help="characters per prompt, completion, reference or rubric field")
    limits.add_argument("--max-inline-rubrics", type=int, default=Limits.max_inline_rubrics,
                        help="distinct rubrics sent with one request, and prepared rubrics the server keeps")
    limits.add_argument("--max-pending-items", type=int, default=ServeConfig.max_pending_items,
                        help="items accepted and not yet answered; beyond it calls get RESOURCE_EXHAUSTED")
    limits.add_argument("--max-message-mb", type=int, default=ServeConfig.max_message_bytes // 2**20,
                        help="largest gRPC message, either way")
    limits.add_argument("--shutdown-grace-s", type=float, default=ServeConfig.shutdown_grace_s,
                        help="on SIGTERM, how long in-flight calls may take to finish")
    limits.add_argument("--max-connection-age-s", type=float, default=ServeConfig.max_connection_age_s,
                        help="close each client connection after about this long (gRPC's max_connection_age), "
                             "so clients of a DNS name with several replicas (a headless Service) reconnect, "
                             "resolve it again and spread calls onto replicas added since; 0: never")
    limits.add_argument("--max-connection-age-grace-s", type=float, default=ServeConfig.max_connection_age_grace_s,
                        help="how long calls already on a connection so closed may take to finish")
    limits.add_argument("--read-memo-size", type=int, default=ServeConfig.read_memo_size,
                        help="slot reads kept, so a prompt read again gets the same probabilities without the "
                             "engine (vLLM's batches move bfloat16 numbers by about 1e-3); 0 keeps none")
    limits.add_argument("--metrics-port", type=int,
                        help="serve Prometheus metrics (ours and vLLM's) over HTTP on this port")
    return serve, add_engine_flags(serve)


def _model(args: argparse.Namespace, engine_args: dict[str, Any], parser: argparse.ArgumentParser) -> str:
    """The judge: positional as in `vllm serve MODEL`, or vLLM's --model; the embedded one by default."""
    flag = engine_args.pop("model", None)
    if args.model_tag and flag and args.model_tag != flag:
        parser.error(f"two models: {args.model_tag!r} (positional) and --model {flag!r}; give one")
    return args.model_tag or flag or EMBEDDED_MODEL


def _auth_tokens(args: argparse.Namespace, parser: argparse.ArgumentParser) -> tuple[str, ...]:
    """The accepted bearer tokens, from whichever source is set; two sources that
    disagree are an error naming both, never a silent precedence."""
    sources: dict[str, tuple[str, ...]] = {}
    if args.api_key:
        sources["--api-key"] = tuple(args.api_key)
    if os.environ.get("VLLM_API_KEY"):
        sources["VLLM_API_KEY"] = (os.environ["VLLM_API_KEY"],)
    if args.auth_token_file is not None:
        try:
            sources["--auth-token-file"] = (read_token(args.auth_token_file),)
        except (OSError, ValueError) as error:
            parser.error(f"--auth-token-file: {error}")
    if os.environ.get(TOKEN_ENV):
        sources[TOKEN_ENV] = (os.environ[TOKEN_ENV],)
    (first, tokens), *others = list(sources.items()) or [("", ())]
    for other, other_tokens in others:
        if other_tokens != tokens:
            parser.error(f"{first} and {other} give different tokens; set one of them")
    if any(not token.strip() for token in tokens):
        parser.error(f"{first}: an empty token")
    return tokens


def _serve(argv: list[str]) -> int:
    from geval_server.server import serve

    parser, engine_flags = _serve_parser()
    args = parser.parse_args(argv)
    engine_args = given_engine_flags(parser, engine_flags, argv)
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    if args.max_connection_age_s < 0 or args.max_connection_age_grace_s < 0:
        parser.error("--max-connection-age-s and --max-connection-age-grace-s: must be 0 or more")
    if not args.judge:
        if args.model_tag or "model" in engine_args:
            parser.error("--no-judge: a judge MODEL was given too; leave it out to serve without a judge")
        if args.rubrics:
            parser.error("--no-judge: --rubrics need a judge; leave them out to serve without a judge")
    if args.read_memo_size < 0:
        parser.error(f"--read-memo-size: must be 0 or more, got {args.read_memo_size}")
    if args.judge_url and not args.judge:
        parser.error("--no-judge serves no judge: leave out --judge-url")
    model = _model(args, engine_args, parser)
    config = ServeConfig(
        model=model, host=args.host, port=args.port, rubric_paths=args.rubrics,
        default_rubric=args.default_rubric, low_confidence_below=args.low_confidence_below,
        engine_args=engine_args, demo=args.demo, auth_tokens=_auth_tokens(args, parser),
        tls_cert=args.tls_cert, tls_key=args.tls_key, metrics_port=args.metrics_port,
        limits=Limits(max_items=args.max_items_per_request, max_field_chars=args.max_field_chars,
                      max_inline_rubrics=args.max_inline_rubrics),
        max_pending_items=args.max_pending_items, max_message_bytes=args.max_message_mb * 1024 * 1024,
        shutdown_grace_s=args.shutdown_grace_s, max_connection_age_s=args.max_connection_age_s,
        max_connection_age_grace_s=args.max_connection_age_grace_s,
        defences=DefenceSettings(args.remove_score_claims, args.masked_read_bound),
        read_memo_size=args.read_memo_size, judge=args.judge, kinds=kind_settings(args, parser),
        remote=remote_config(args, model, engine_args, parser),
    )
    return asyncio.run(serve(config))


def main(argv: list[str] | None = None) -> None:
    """`serve [MODEL] [flags]`, as typed after `geval-reward`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] != ["serve"]:
        sys.exit("usage: python -m geval_server.cli serve [MODEL] [flags] "
                 "(the audits: geval-reward audit, geval-reward redteam)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(_serve(argv[1:]))


if __name__ == "__main__":
    main()
