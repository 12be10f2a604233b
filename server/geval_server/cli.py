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
from geval_server.config import RewardModelConfig, ServeConfig
from geval_server.defences.chain import DefenceSettings
from geval_server.engine.defaults import defaults_line
from geval_server.engine.embedded_model import EMBEDDED_MODEL
from geval_server.engine.flags import add_engine_flags, given_engine_flags
from geval_server.engine.remote.flags import add_remote_flags, remote_config
from geval_server.scorers.reward_model.scorer import NAME as REWARD_MODEL_NAME

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
    server.add_argument("--default-rubric", default=ServeConfig.default_rubric)
    server.add_argument("--low-confidence-below", type=float, default=ServeConfig.low_confidence_below,
                        help="flag a score whose label mass is under this")
    server.add_argument("--demo", action="store_true", help="score a few example pairs once ready")
    server.add_argument("--no-semscore", dest="semscore", action="store_false",
                        help="do not serve SemScore (rubric 'semscore'), saving its embedding model's memory")
    server.add_argument("--keep-score-claims", dest="remove_score_claims", action="store_false",
                        help="judge completions as written: do not remove score claims such as 'Coherence: 5' "
                             "(on by default: small judges copy them)")
    server.add_argument("--no-masked-read-bound", dest="masked_read_bound", action="store_false",
                        help="do not read a completion with a numeral a second time with its numerals masked "
                             "(on by default: the reward is the lower read, so a score claim in any spelling can "
                             "only lower it; costs one more read per such completion)")
    reward = serve.add_argument_group(
        "reward-model", "A trained reward model (a sequence classifier) served as rubric 'reward-model', in a second "
        "vLLM engine beside the judge (docs/scorers.md#reward-model).")
    reward.add_argument("--reward-model", metavar="PATH",
                        help="a *ForSequenceClassification checkpoint (Skywork-Reward, ArmoRM, ...) to serve as "
                             "'reward-model'; its own chat template renders each (prompt, completion)")
    reward.add_argument("--no-judge", dest="judge", action="store_false",
                        help="serve the reward model alone, without the judge (MODEL is then not started; "
                             "G-Eval rubrics are refused); needs --reward-model")
    reward.add_argument("--reward-model-head", metavar="NAME",
                        help="the output (id2label name) the reward is made from, for a model with several "
                             "(unset: the first); every output is reported")
    reward.add_argument("--reward-model-center", type=float, default=RewardModelConfig.center,
                        help="without a reference, reward = sigmoid((raw - center) / scale); fit both on your "
                             "completions with `geval-reward fit-reward-model`")
    reward.add_argument("--reward-model-scale", type=float, default=RewardModelConfig.scale,
                        help="see --reward-model-center")
    reward.add_argument("--reward-model-memory-fraction", type=float, default=RewardModelConfig.memory_fraction,
                        help="on a GPU, the reward model's share of the memory the judge would have had "
                             "(--gpu-memory-utilization); the judge keeps the rest. On CPU the reward model gets a "
                             "1 GiB KV cache beside the judge's")
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
    reward_model = None
    if args.reward_model is not None:
        if args.reward_model_scale <= 0:
            parser.error(f"--reward-model-scale: must be positive, got {args.reward_model_scale}")
        if not 0 < args.reward_model_memory_fraction < 1:
            parser.error(f"--reward-model-memory-fraction: must be between 0 and 1, got "
                         f"{args.reward_model_memory_fraction}")
        reward_model = RewardModelConfig(args.reward_model, args.reward_model_head, args.reward_model_center,
                                         args.reward_model_scale, args.reward_model_memory_fraction)
    elif not args.judge:
        parser.error("--no-judge serves a reward model alone: give --reward-model PATH")
    default_rubric = args.default_rubric
    if not args.judge:
        if args.model_tag or "model" in engine_args:
            parser.error("--no-judge: a judge MODEL was given too; leave it out to serve the reward model alone")
        if args.rubrics:
            parser.error("--no-judge: --rubrics need a judge; leave them out to serve the reward model alone")
        if default_rubric == ServeConfig.default_rubric:
            default_rubric = REWARD_MODEL_NAME
        elif default_rubric != REWARD_MODEL_NAME:
            parser.error(f"--no-judge: --default-rubric {default_rubric!r} needs a judge; the reward model alone "
                         f"serves {REWARD_MODEL_NAME!r}")
    if args.read_memo_size < 0:
        parser.error(f"--read-memo-size: must be 0 or more, got {args.read_memo_size}")
    if args.judge_url and not args.judge:
        parser.error("--no-judge serves no judge: leave out --judge-url")
    model = _model(args, engine_args, parser)
    config = ServeConfig(
        model=model, host=args.host, port=args.port, rubric_paths=args.rubrics,
        default_rubric=default_rubric, low_confidence_below=args.low_confidence_below,
        engine_args=engine_args, demo=args.demo, auth_tokens=_auth_tokens(args, parser),
        tls_cert=args.tls_cert, tls_key=args.tls_key, metrics_port=args.metrics_port,
        limits=Limits(max_items=args.max_items_per_request, max_field_chars=args.max_field_chars,
                      max_inline_rubrics=args.max_inline_rubrics),
        max_pending_items=args.max_pending_items, max_message_bytes=args.max_message_mb * 1024 * 1024,
        shutdown_grace_s=args.shutdown_grace_s, max_connection_age_s=args.max_connection_age_s,
        max_connection_age_grace_s=args.max_connection_age_grace_s, semscore=args.semscore,
        defences=DefenceSettings(args.remove_score_claims, args.masked_read_bound),
        read_memo_size=args.read_memo_size, reward_model=reward_model, judge=args.judge,
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
