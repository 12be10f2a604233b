"""Wires the judge into a gRPC server: health, reflection, auth, TLS, metrics,
graceful shutdown, and an exit when an engine in this process dies so a supervisor restarts
us (a remote judge that is unreachable: NOT_SERVING until it is back)."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc
from geval_client.pb import reward_pb2, reward_pb2_grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from geval_server.api.auth import TokenAuthInterceptor
from geval_server.api.calls import CallInterceptor
from geval_server.api.servicer import RewardService
from geval_server.config import ServeConfig
from geval_server.engine.defaults import split_here
from geval_server.engine.embedded_model import resolve_model
from geval_server.engine.protocol import ClassifierEngine, Engine, JudgeEngine, judge_identity
from geval_server.engine.remote.engine import RemoteEngine
from geval_server.engine.tokenization import JudgeTokenizerError, Tokenization
from geval_server.engine.vllm_classifier import VllmClassifier
from geval_server.engine.vllm_engine import VllmEngine
from geval_server.judge.judge import Judge
from geval_server.metrics import serve_metrics
from geval_server.scorers.base import JudgeInput, Scorer, Unservable
from geval_server.scorers.inline import InlineRubrics
from geval_server.scorers.kind import JudgeContext, ScorerKind, StartContext
from geval_server.scorers.registry import KINDS

log = logging.getLogger(__name__)

SERVICE_NAME = reward_pb2.DESCRIPTOR.services_by_name["RewardService"].full_name
EXIT_ENGINE_DIED = 3
ENGINE_WATCH_INTERVAL_S = 0.5
# Container objects allocated between two collections of the youngest generation (Python's
# default: 700). A call holds thousands of live objects (a prompt's ids, tasks, results), and
# each collection walked them all: a quarter of the frontend's CPU per item, measured with
# 4 rubrics per call (benchmarks/bench_frontend.py), against almost none at 20,000.
GC_YOUNG_OBJECTS = 20_000


# Scored once before the server reports ready: a judge that cannot score it is not served.
# Its `4` is in neither prompt nor reference, so the probe takes both slot reads (defences/chain.py).
PROBE_ITEM = JudgeInput(prompt="What is 2 + 2?", completion="2 + 2 is 4.", reference="Four.")


async def start_judge(config: ServeConfig, make_engine: Callable[..., JudgeEngine] = VllmEngine,
                      make_classifier: Callable[..., ClassifierEngine] = VllmClassifier) -> Judge:
    """Starts the judge's engine (unless serve --no-judge) and every served kind of scorer
    (scorers/registry.py), then scores a probe item with the default rubric: a judge the server
    cannot drive fails here with its cause (SystemExit), never at the first call.
    make_engine(model_path, engine_args, read_memo_size): the judge's engine (engine/protocol.py);
    make_classifier(path, engine_args): a classifier's, for a kind that serves one."""
    kinds = [(kind, config.kinds[kind.name]) for kind in KINDS
             if kind.name in config.kinds and (config.judge or not kind.needs_judge)]
    checked = [(kind, kind.check(settings, config)) for kind, settings in kinds]  # files read before engines start
    shares = dict(share for kind, settings in kinds if (share := kind.engine_share(settings)) is not None)
    try:
        judge_args, engine_args = split_here(config.engine_args, shares, config.judge)
    except ValueError as error:
        raise SystemExit(f"geval-reward: {error}") from error
    judge_context = _start_judge_engine(config, judge_args, make_engine) if config.judge else None
    engines = [judge_context.engine] if judge_context is not None else []
    judge = None
    try:
        judge, probed = await serve_kinds(config, judge_context, checked, make_classifier, engine_args)
        if probed is not None:
            await probe_judge(judge, probed)
    except (Unservable, JudgeStartError) as error:
        _shutdown(judge.engines if judge is not None else engines)
        raise SystemExit(f"geval-reward: cannot serve judge {config.model}: {error}") from error
    except BaseException:
        _shutdown(judge.engines if judge is not None else engines)
        raise
    return judge


async def serve_kinds(config: ServeConfig, judge_context: JudgeContext | None,
                      checked: Sequence[tuple[ScorerKind, Any]],
                      make_classifier: Callable[..., ClassifierEngine] = VllmClassifier,
                      engine_args: Mapping[str, dict[str, Any]] | None = None) -> tuple[Judge, str | None]:
    """The judge over a started judge engine (or none): each kind started with what its `check`
    read, its scorers served by name and its inline specs prepared as they come; the default
    rubric resolved. An engine a kind started is shut down with the others if a later one fails.
    engine_args: the arguments of each kind's own engine, by the flag of its share (split_memory).
    Also returns the rubric whose probe shows the engines can be driven: the default where an
    engine reads it, else the first default offered by a kind that reads one (None: no engine)."""
    engines = [judge_context.engine] if judge_context is not None else []
    preparers: dict[type, Callable] = {}
    judge = Judge(engines, {}, config.model if judge_context is not None else "",
                  InlineRubrics(_dispatch(preparers), config.limits.max_inline_rubrics), config.defences)
    context = StartContext(config, judge_context, lambda scorer: _probe(judge, scorer), make_classifier,
                           engine_args or {})
    defaults: list[str] = []
    engine_kinds: set[str] = set()  # the kinds that read an engine
    try:
        for kind, value in checked:
            served = await kind.start(value, context)
            judge.engines += served.engines
            for scorer in served.scorers:
                if scorer.name in judge.scorers:
                    kinds = f"{judge.scorers[scorer.name].kind} and {scorer.kind}"
                    raise SystemExit(f"geval-reward: two scorers are named {scorer.name!r} ({kinds}); rename one")
                judge.scorers[scorer.name] = scorer
            preparers.update(served.inline)
            defaults += [served.default] if served.default in judge.scorers else []
            if kind.needs_judge or served.engines:
                engine_kinds.add(kind.name)
        if judge_context is None and judge.engines:
            judge.judge_model = judge.engines[0].model
        judge.refresh()
        judge.default_rubric = _default_rubric(config, judge.scorers, defaults)
    except BaseException:
        _shutdown(judge.engines[len(engines):])
        raise
    probed = [name for name in (judge.default_rubric, *defaults)
              if name in judge.scorers and judge.scorers[name].kind in engine_kinds]
    return judge, next(iter(probed), None)


def _start_judge_engine(config: ServeConfig, engine_args: dict[str, Any],
                        make_engine: Callable[..., JudgeEngine]) -> JudgeContext:
    """The judge's tokenizer checked, then its engine started on engine_args (the user's, less
    what other kinds' engines take of its memory)."""
    from transformers import AutoTokenizer

    model_path = resolve_model(config.model)
    try:  # the tokenizer is checked before the slow engine start
        tokenization = Tokenization(AutoTokenizer.from_pretrained(config.engine_args.get("tokenizer") or model_path))
    except JudgeTokenizerError as error:
        raise SystemExit(f"geval-reward: cannot serve judge {config.model}: {error}") from error
    if config.remote is not None:  # the judge on the user's OpenAI-compatible servers
        engine = RemoteEngine(model_path, config.remote, engine_args, config.read_memo_size)
    else:
        engine = make_engine(model_path, engine_args, config.read_memo_size)
    engine.start()
    return JudgeContext(engine, tokenization, config.model, judge_identity(config.model, engine.dtype))


def _default_rubric(config: ServeConfig, scorers: dict[str, Scorer], defaults: list[str]) -> str:
    """The rubric a call without rubrics is scored with: --default-rubric, else the first served
    kind's offer (the judge's overall-quality; a reward model served alone, its own)."""
    if config.default_rubric is not None:
        if config.default_rubric not in scorers:
            raise SystemExit(f"--default-rubric: unknown rubric {config.default_rubric!r}; known: {sorted(scorers)}")
        return config.default_rubric
    if not defaults:
        raise SystemExit("geval-reward: no default rubric: without a judge (serve --no-judge) serve a reward model "
                         f"(--reward-model) or name one of {sorted(scorers)} with --default-rubric")
    return defaults[0]


def _dispatch(preparers: dict[type, Callable]) -> Callable:
    """Prepares an inline spec with the kind that took its type; a spec of a kind not served
    (one that reads the judge, under serve --no-judge) is refused as the caller's to fix."""

    async def prepare(spec):
        prepare_kind = preparers.get(type(spec))
        if prepare_kind is None:
            raise Unservable(f"this server does not serve rubrics like {spec.name!r}: their kind reads the judge, "
                             "which this server does not run (serve --no-judge)")
        return await prepare_kind(spec)

    return prepare


class JudgeStartError(RuntimeError):
    """The judge started but cannot score."""


async def _probe(judge: Judge, scorer: Scorer) -> str | None:
    """PROBE_ITEM scored with `scorer` as a call would; None, or how it failed."""
    (outcome,) = await judge.score([PROBE_ITEM], [[(scorer, 1.0)]])
    return None if outcome.failure is None else f"({outcome.failure.code}): {outcome.failure.message}"


async def probe_judge(judge: Judge, rubric: str) -> None:
    """Scores PROBE_ITEM with `rubric` as a call would; raises JudgeStartError naming the failure."""
    failure = await _probe(judge, judge.scorers[rubric])
    if failure is not None:
        raise JudgeStartError(f"scoring a probe item with rubric {rubric!r} failed {failure}")


def _bind(server: grpc.aio.Server, config: ServeConfig) -> int:
    address = f"{config.host}:{config.port}"
    if config.tls_cert is None:
        return server.add_insecure_port(address)
    credentials = grpc.ssl_server_credentials([(config.tls_key.read_bytes(), config.tls_cert.read_bytes())])
    return server.add_secure_port(address, credentials)


def server_options(config: ServeConfig) -> list[tuple[str, int]]:
    """The gRPC server's channel options: message limits, and the connection age after which
    clients reconnect (and re-resolve a headless Service's name), none when it is 0."""
    options = [
        ("grpc.max_send_message_length", config.max_message_bytes),
        ("grpc.max_receive_message_length", config.max_message_bytes),
    ]
    if config.max_connection_age_s > 0:  # gRPC reads both as C ints of milliseconds
        options += [("grpc.max_connection_age_ms", min(round(config.max_connection_age_s * 1000), 2**31 - 1)),
                    ("grpc.max_connection_age_grace_ms",
                     min(round(config.max_connection_age_grace_s * 1000), 2**31 - 1))]
    return options


def build_server(judge: Judge, config: ServeConfig) -> tuple[grpc.aio.Server, health.aio.HealthServicer, int]:
    """The gRPC server around a started judge, bound but not started: reward service,
    health, reflection, auth, TLS, message limits and connection age. Returns it, its
    health servicer and the bound port."""
    # The call log first: it is outermost, so it sees (and logs) the calls auth refuses.
    interceptors = [CallInterceptor()] + ([TokenAuthInterceptor(config.auth_tokens)] if config.auth_tokens else [])
    server = grpc.aio.server(options=server_options(config), interceptors=interceptors)
    settings: dict[str, str] = {}
    if judge.engines:  # the first engine's settings unprefixed: the judge's (a reward model's served alone)
        first = judge.engine
        settings.update({key: str(value) for key, value in first.settings.items()})
        settings.update(first.environment)
        settings["max_model_len"] = str(first.max_model_len)
        settings["dtype"], settings["dtype_reason"] = first.dtype, first.dtype_reason
        settings["model_path"] = first.model
    for other in judge.engines[1:]:  # beside the judge, each under its role: reward_model.max_model_len
        prefix = other.role.removeprefix("the ").replace(" ", "_")
        settings.update({f"{prefix}.{key}": str(value) for key, value in other.settings.items()})
    service = RewardService(
        judge, judge.default_rubric, settings, config.limits, config.max_pending_items, config.low_confidence_below
    )
    reward_pb2_grpc.add_RewardServiceServicer_to_server(service, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection([SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    return server, health_servicer, _bind(server, config)


def settle() -> None:
    """Called once the judge is ready, so that serving costs less CPU per item. What start-up
    loaded (vLLM, torch, the tokenizer) is moved out of the garbage collector's sight, as
    vLLM's own server does, and the youngest generation is collected less often. vLLM's
    environment variables are read once from now on (vLLM's own `enable_envs_cache`, which its
    engine processes call after start-up): every request's SamplingParams read several, about
    a tenth of the frontend's CPU per engine request (benchmarks/bench_frontend.py)."""
    from vllm.envs import enable_envs_cache

    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_OBJECTS, *gc.get_threshold()[1:])
    enable_envs_cache()


def _shutdown(engines: Sequence[Engine]) -> None:
    for engine in engines:
        engine.shutdown()


async def _watch_engine(judge: Judge, died: asyncio.Event, health_servicer: health.aio.HealthServicer) -> None:
    """Sets `died` when an engine that cannot come back is down. While only engines that recover
    by themselves are down (a remote judge), health reports NOT_SERVING, and SERVING once they are up."""
    serving = True
    while True:
        await asyncio.sleep(ENGINE_WATCH_INTERVAL_S)
        down = [engine for engine in judge.engines if not engine.is_running]
        if any(not engine.recovers for engine in down):
            break
        if serving == bool(down):
            serving = not down
            roles = " and ".join(engine.role for engine in down or judge.engines)
            if serving:
                log.info("%s engine is back; serving", roles)
            else:
                log.error("%s engine is unreachable; answering UNAVAILABLE until it is back", roles)
            await _set_health(health_servicer, health_pb2.HealthCheckResponse.SERVING if serving
                              else health_pb2.HealthCheckResponse.NOT_SERVING)
    dead = [engine.role for engine in judge.engines if not engine.is_running]
    log.error("%s engine died; refusing calls and exiting so a supervisor restarts the server", " and ".join(dead))
    died.set()


async def _set_health(health_servicer: health.aio.HealthServicer, status) -> None:
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, status)


async def serve(config: ServeConfig) -> int:
    """Serves until SIGTERM/SIGINT (returns 0) or engine death (returns EXIT_ENGINE_DIED)."""
    # Handlers first: a SIGTERM during the engine start must still shut the engine
    # down, or its worker processes outlive us holding their memory.
    stop, died = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    judge = await start_judge(config)
    if stop.is_set():
        _shutdown(judge.engines)
        return 0
    server, health_servicer, port = build_server(judge, config)
    settle()
    if config.metrics_port is not None:
        serve_metrics(config.metrics_port, config.host,
                      lambda: sum(engine.requests_in_flight() for engine in judge.engines))
    await server.start()
    await _set_health(health_servicer, health_pb2.HealthCheckResponse.SERVING)
    log.info(
        "serving judge %s on %s:%d (%s, %s); rubrics: %s (default %s)",
        config.model, config.host, port, "TLS" if config.tls_cert else "plaintext",
        "token required" if config.auth_tokens else "no auth", ", ".join(sorted(judge.scorers)),
        judge.default_rubric,
    )
    print(f"geval-reward: ready on {config.host}:{port}", flush=True)

    watcher = asyncio.create_task(_watch_engine(judge, died, health_servicer))
    if config.demo:
        from geval_server.demo import show_demo

        await show_demo(f"127.0.0.1:{port}" if config.host in ("0.0.0.0", "::") else f"{config.host}:{port}")
    await asyncio.wait([asyncio.create_task(stop.wait()), asyncio.create_task(died.wait())],
                       return_when=asyncio.FIRST_COMPLETED)
    # Stop accepting, tell orchestrators, let in-flight calls finish within the grace period.
    await health_servicer.enter_graceful_shutdown()
    grace = 0 if died.is_set() else config.shutdown_grace_s
    log.info("shutting down: finishing in-flight calls (grace %.0f s)", grace)
    await server.stop(grace=grace)
    watcher.cancel()
    _shutdown(judge.engines)
    # What settle() froze stays out of every collection, the interpreter's last one at exit
    # included, where Triton's extension (imported by vLLM) then reported each of its objects
    # as leaked: some 30 lines after ours. vLLM's engine process unfreezes at shutdown too.
    gc.unfreeze()
    log.info("stopped")
    return EXIT_ENGINE_DIED if died.is_set() else 0
