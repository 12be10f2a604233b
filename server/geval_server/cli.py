"""`geval-reward`: the command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import pathlib
import sys
from typing import Any

from geval_audit import cli as audit_cli
from geval_client.transport import read_token

from .config import ServeConfig
from .embedded_model import EMBEDDED_MODEL
from .validation import Limits


def _engine_arg(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.replace("-", "_"), json.loads(value)
    except json.JSONDecodeError:
        return key.replace("-", "_"), value


def _add_serve(commands) -> None:
    serve = commands.add_parser("serve", help="serve rewards over gRPC")
    serve.add_argument("--model", default=EMBEDDED_MODEL,
                       help=f"judge: a local checkpoint path or hub id (default: {EMBEDDED_MODEL}, offline)")
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    serve.add_argument("--port", type=int, default=50051, help="0 picks a free port")
    serve.add_argument("--rubrics", type=pathlib.Path, action="append", default=[],
                       help="a rubric TOML file or a directory of them, added to the presets (repeatable)")
    serve.add_argument("--default-rubric", default=ServeConfig.default_rubric)
    serve.add_argument("--low-confidence-below", type=float, default=ServeConfig.low_confidence_below,
                       help="flag a score whose label mass is under this (default %(default)s)")
    serve.add_argument("--demo", action="store_true", help="score a few example pairs once ready")
    serve.add_argument("--no-semscore", dest="semscore", action="store_false",
                       help="do not serve SemScore (rubric 'semscore'), saving its embedding model's memory")
    serve.add_argument("--keep-score-claims", dest="remove_score_claims", action="store_false",
                       help="judge completions as written: do not blank score claims such as 'Coherence: 5' "
                            "(on by default: small judges copy them)")
    access = serve.add_argument_group("access")
    access.add_argument("--auth-token-file", type=pathlib.Path,
                        help="require `authorization: Bearer <token>` on every call but health checks; "
                             "the token is this file's content (or set GEVAL_REWARD_AUTH_TOKEN)")
    access.add_argument("--tls-cert", type=pathlib.Path, help="PEM certificate chain; serve TLS")
    access.add_argument("--tls-key", type=pathlib.Path, help="PEM private key for --tls-cert")
    limits = serve.add_argument_group("limits and operations")
    limits.add_argument("--max-items-per-request", type=int, default=Limits.max_items)
    limits.add_argument("--max-field-chars", type=int, default=Limits.max_field_chars,
                        help="characters per prompt, completion, reference or rubric field")
    limits.add_argument("--max-inline-rubrics", type=int, default=Limits.max_inline_rubrics,
                        help="distinct rubrics sent with one request, and prepared rubrics the server keeps "
                             "(default %(default)s)")
    limits.add_argument("--max-pending-items", type=int, default=ServeConfig.max_pending_items,
                        help="items accepted and not yet answered; beyond it calls get RESOURCE_EXHAUSTED")
    limits.add_argument("--max-message-mb", type=int, default=ServeConfig.max_message_bytes // 2**20,
                        help="largest gRPC message, either way (default %(default)s)")
    limits.add_argument("--shutdown-grace-s", type=float, default=ServeConfig.shutdown_grace_s,
                        help="on SIGTERM, how long in-flight calls may take to finish")
    limits.add_argument("--metrics-port", type=int, help="serve Prometheus metrics over HTTP on this port")
    engine = serve.add_argument_group("engine (passed to vLLM)")
    engine.add_argument("--max-model-len", type=int)
    engine.add_argument("--tensor-parallel-size", type=int)
    engine.add_argument("--data-parallel-size", type=int)
    engine.add_argument("--gpu-memory-utilization", type=float,
                        help="share of accelerator memory to use (on CPU: of host memory, reserved up front; "
                             "the CPU default is instead a fixed 2 GiB KV cache, "
                             "see --engine-arg kv_cache_memory_bytes=N)")
    engine.add_argument("--dtype")
    engine.add_argument("--no-prefix-caching", dest="enable_prefix_caching", action="store_false", default=None)
    engine.add_argument("--engine-arg", type=_engine_arg, action="append", default=[], metavar="KEY=VALUE",
                        help="any other vLLM engine argument, value parsed as JSON when it can be (repeatable)")


def _engine_args(args: argparse.Namespace) -> dict[str, Any]:
    named = ("max_model_len", "tensor_parallel_size", "data_parallel_size",
             "gpu_memory_utilization", "dtype", "enable_prefix_caching")
    engine = {key: getattr(args, key) for key in named if getattr(args, key) is not None}
    engine.update(dict(args.engine_arg))
    return engine


def _auth_token(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str | None:
    try:
        return read_token(args.auth_token_file)
    except ValueError as error:
        parser.error(f"--auth-token-file: {error}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="geval-reward", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    _add_serve(commands)
    audit_cli.add_parser(commands)
    audit_cli.add_redteam_parser(commands)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        from .server import serve

        if (args.tls_cert is None) != (args.tls_key is None):
            parser.error("--tls-cert and --tls-key go together")
        config = ServeConfig(
            model=args.model, host=args.host, port=args.port, rubric_paths=args.rubrics,
            default_rubric=args.default_rubric, low_confidence_below=args.low_confidence_below,
            engine_args=_engine_args(args), demo=args.demo, auth_token=_auth_token(args, parser),
            tls_cert=args.tls_cert, tls_key=args.tls_key, metrics_port=args.metrics_port,
            limits=Limits(max_items=args.max_items_per_request, max_field_chars=args.max_field_chars,
                          max_inline_rubrics=args.max_inline_rubrics),
            max_pending_items=args.max_pending_items, max_message_bytes=args.max_message_mb * 1024 * 1024,
            shutdown_grace_s=args.shutdown_grace_s, semscore=args.semscore,
            remove_score_claims=args.remove_score_claims,
        )
        sys.exit(asyncio.run(serve(config)))
    elif args.command == "audit":
        raise SystemExit(audit_cli.main(args))
    elif args.command == "redteam":
        raise SystemExit(audit_cli.redteam_main(args))


if __name__ == "__main__":
    main()
