"""Wires the judge into a gRPC server: health, reflection, auth, TLS, metrics,
graceful shutdown, and an exit when an engine in this process dies so a supervisor restarts
us (a remote judge that is unreachable: NOT_SERVING until it is back)."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import Callable, Sequence

import grpc
from geval_client.pb import reward_pb2, reward_pb2_grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from geval_server.api.auth import TokenAuthInterceptor
from geval_server.api.calls import CallInterceptor
from geval_server.api.servicer import RewardService
from geval_server.api.wire import Limits
from geval_server.config import RewardModelConfig, ServeConfig
from geval_server.defences.chain import DefenceSettings
from geval_server.engine.defaults import split_memory
from geval_server.engine.embedded_model import resolve_model
from geval_server.engine.protocol import ClassifierEngine, JudgeEngine, judge_identity
from geval_server.engine.remote.engine import RemoteEngine
from geval_server.engine.tokenization import JudgeTokenizerError, Tokenization
from geval_server.engine.vllm_classifier import VllmClassifier
from geval_server.engine.vllm_engine import VllmEngine, platform
from geval_server.groupwise.judge import GroupJudge
from geval_server.judge.judge import Judge
from geval_server.metrics import serve_metrics
from geval_server.scorers.base import JudgeInput, Scorer
from geval_server.scorers.geval.inline import InlineRubrics
from geval_server.scorers.geval.rubrics import PRESET_DIR, Rubric, RubricError, load_rubrics, rubric_files
from geval_server.scorers.geval.scorer import GEvalPreparer
from geval_server.scorers.geval.slot import LabelTokenError
from geval_server.scorers.likelihood.scorer import LikelihoodScorer
from geval_server.scorers.likelihood.spec import LikelihoodSpec, load_specs
from geval_server.scorers.reward_model.chat import ChatRenderer
from geval_server.scorers.reward_model.checkpoint import Checkpoint, RewardModelError, read_checkpoint
from geval_server.scorers.reward_model.scorer import Calibration, RewardModelScorer
from geval_server.scorers.semscore import EmbeddingModel, SemScoreScorer

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
    """Starts the engines, prepares every scorer and scores a probe item: a judge the server
    cannot drive fails here with its cause (SystemExit), never at the first call.
    make_engine(model_path, engine_args, read_memo_size): the engine to drive (protocol.py);
    make_classifier(path, engine_args): the reward model's, with --reward-model."""
    engine_args, classifier_args = config.engine_args, {}
    if config.reward_model is not None:
        engine_args, classifier_args = split_memory(config.engine_args, platform(), config.reward_model.memory_fraction,
                                                    judge=config.judge)
    if not config.judge:
        return await start_reward_model_alone(config, make_classifier(config.reward_model.path, classifier_args))
    from transformers import AutoTokenizer

    # Fail on a bad rubric file before the slow engine start.
    files = rubric_files(config.rubric_paths)
    rubrics, likelihood = load_rubrics(config.rubric_paths), load_specs(files)
    both = sorted(set(rubrics) & set(likelihood))
    if both:
        raise SystemExit(f"--rubrics: {both} named both a G-Eval rubric and a likelihood scorer")
    if config.default_rubric not in {**rubrics, **likelihood}:
        raise SystemExit(f"--default-rubric: unknown rubric {config.default_rubric!r}; "
                         f"known: {sorted({**rubrics, **likelihood})}")
    model_path = resolve_model(config.model)
    try:  # the tokenizer is checked before the slow engine start
        tokenization = Tokenization(AutoTokenizer.from_pretrained(config.engine_args.get("tokenizer") or model_path))
    except JudgeTokenizerError as error:
        raise SystemExit(f"geval-reward: cannot serve judge {config.model}: {error}") from error
    checkpoint = _checkpoint(config)
    if config.remote is not None:  # the judge on the user's OpenAI-compatible servers
        engine = RemoteEngine(model_path, config.remote, engine_args, config.read_memo_size)
    else:
        engine = make_engine(model_path, engine_args, config.read_memo_size)
    engine.start()
    classifier = None
    try:
        if config.remote is not None and engine.prompt_logprobs_missing:
            likelihood = _without_likelihood(likelihood, files, config.default_rubric, engine.prompt_logprobs_missing)
        judge = await prepare_judge(
            engine, tokenization, judge_model=config.model, rubrics=list(rubrics.values()),
            likelihood=list(likelihood.values()), embedding_model=EmbeddingModel() if config.semscore else None,
            low_confidence_below=config.low_confidence_below, defences=config.defences,
            max_inline_rubrics=config.limits.max_inline_rubrics,
        )
        await probe_judge(judge, config.default_rubric)
        if checkpoint is not None:
            classifier = make_classifier(checkpoint.path, classifier_args)
            await add_reward_model(judge, classifier, checkpoint, config.reward_model)
    except (LabelTokenError, RubricError, JudgeStartError) as error:
        engine.shutdown()
        raise SystemExit(f"geval-reward: cannot serve judge {config.model}: {error}") from error
    except BaseException:
        engine.shutdown()
        raise
    return judge


def _without_likelihood(likelihood: dict[str, LikelihoodSpec], files, default_rubric: str, missing: str
                        ) -> dict[str, LikelihoodSpec]:
    """No likelihood scorer on a judge without prompt log-probabilities: the presets are left
    out (logged), and one the user asked for (a --rubrics file, --default-rubric) refuses the
    start, naming what is missing."""
    asked = sorted(set(load_specs([(path, data) for path, data in files if path.parent != PRESET_DIR]))
                   | ({default_rubric} & set(likelihood)))
    if asked:
        raise JudgeStartError(f"likelihood scorer(s) {asked} need prompt log-probabilities: {missing}")
    log.warning("the likelihood scorers are not served: %s", missing)
    return {}


def _checkpoint(config: ServeConfig) -> Checkpoint | None:
    """The reward model's checkpoint, checked before any engine starts (SystemExit naming the flag)."""
    if config.reward_model is None:
        return None
    trust = bool(config.engine_args.get("trust_remote_code"))
    try:
        return read_checkpoint(config.reward_model.path, config.reward_model.head, trust)
    except RewardModelError as error:
        raise SystemExit(f"geval-reward: {error}") from error


async def add_reward_model(judge: Judge, classifier: ClassifierEngine, checkpoint: Checkpoint,
                           settings: RewardModelConfig) -> None:
    """Starts the reward model's engine and serves it as `reward-model` beside the judge's
    scorers, after a probe item; a model vLLM refuses, or one that cannot score, fails here
    (SystemExit naming --reward-model) and its engine is shut down."""
    from transformers import AutoTokenizer

    path = checkpoint.path
    try:
        trust = bool(classifier.settings.get("trust_remote_code"))
        chat = ChatRenderer(Tokenization(AutoTokenizer.from_pretrained(path, trust_remote_code=trust)))
    except (JudgeTokenizerError, RewardModelError) as error:
        raise SystemExit(f"geval-reward: --reward-model {path}: {error}") from error
    try:
        classifier.start()
    except Exception as error:  # vLLM refuses the checkpoint (architecture, task, memory)
        classifier.shutdown()
        raise SystemExit(f"geval-reward: --reward-model {path}: vLLM cannot serve it as a classifier: "
                         f"{type(error).__name__}: {error}") from error
    scorer = RewardModelScorer(classifier, checkpoint, chat, Calibration(settings.center, settings.scale))
    judge.scorers[scorer.name] = scorer
    if classifier is not judge.engine:  # alone (--no-judge), it already stands as the judge's
        judge.engines.append(classifier)
    (outcome,) = await judge.score([PROBE_ITEM], [[(scorer, 1.0)]])
    if outcome.failure is not None:
        classifier.shutdown()
        raise SystemExit(f"geval-reward: --reward-model {path}: scoring a probe item failed "
                         f"({outcome.failure.code}): {outcome.failure.message}")
    log.info("serving reward model %s as %r (head %r of %s)", path, scorer.name,
             checkpoint.heads[checkpoint.head], list(checkpoint.heads))


async def _no_judge(rubric: Rubric) -> Scorer:
    raise RubricError("this server serves a reward model without a judge (serve --no-judge): "
                      "G-Eval rubrics need a judge")


async def start_reward_model_alone(config: ServeConfig, classifier: ClassifierEngine) -> Judge:
    """A server for the reward model alone (serve --no-judge): its engine stands where the
    judge's would, and rubrics other than `reward-model` are refused."""
    checkpoint = _checkpoint(config)
    judge = Judge(classifier, {}, config.reward_model.path, InlineRubrics(_no_judge, config.limits.max_inline_rubrics),
                  None, config.defences)
    await add_reward_model(judge, classifier, checkpoint, config.reward_model)
    return judge


class JudgeStartError(RuntimeError):
    """The judge started but cannot score."""


async def probe_judge(judge: Judge, rubric: str) -> None:
    """Scores PROBE_ITEM with `rubric` as a call would; raises JudgeStartError naming the failure."""
    (outcome,) = await judge.score([PROBE_ITEM], [[(judge.scorers[rubric], 1.0)]])
    if outcome.failure is not None:
        raise JudgeStartError(
            f"scoring a probe item with rubric {rubric!r} failed ({outcome.failure.code}): {outcome.failure.message}"
        )


async def prepare_judge(
    engine: JudgeEngine,
    tokenization: Tokenization,
    *,
    judge_model: str,
    rubrics: Sequence[Rubric],
    likelihood: Sequence[LikelihoodSpec] = (),
    embedding_model: EmbeddingModel | None = None,
    low_confidence_below: float = ServeConfig.low_confidence_below,
    defences: DefenceSettings = DefenceSettings(),
    max_inline_rubrics: int = Limits.max_inline_rubrics,
) -> Judge:
    """The judge over a started engine: a G-Eval scorer per rubric, a likelihood scorer per
    spec, SemScore beside them when its model is given, callers' rubrics prepared as they
    come, behind the defences. The defences change what the judge reads, so they are part
    of every rubric's hash; the number format changes what the judge computes, so the
    hashes name the judge with it."""
    identity = judge_identity(judge_model, engine.dtype)
    preparer = GEvalPreparer(engine, tokenization, identity, low_confidence_below, defences.policy)
    served = await asyncio.gather(*(preparer.scorer(rubric) for rubric in rubrics))  # steps written in one batch
    scorers: dict[str, Scorer] = {scorer.name: scorer for scorer in served}
    for spec in likelihood:
        scorers[spec.name] = LikelihoodScorer(spec, engine, tokenization, identity)
    if embedding_model is not None:
        semscore = SemScoreScorer(embedding_model)
        scorers[semscore.name] = semscore
        log.info("serving SemScore as rubric %r (%s)", semscore.name, embedding_model.description)
    inline = InlineRubrics(preparer.scorer, max_inline_rubrics)
    groups = GroupJudge(engine, tokenization, preparer.vocabulary)
    return Judge(engine, scorers, judge_model, inline, groups, defences)


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
    settings = {key: str(value) for key, value in judge.engine.settings.items()}
    settings.update(judge.engine.environment)
    settings["max_model_len"] = str(judge.engine.max_model_len)
    settings["dtype"], settings["dtype_reason"] = judge.engine.dtype, judge.engine.dtype_reason
    settings["model_path"] = judge.engine.model
    for other in judge.engines[1:]:  # the reward model's, beside the judge
        settings.update({f"reward_model.{key}": str(value) for key, value in other.settings.items()})
    service = RewardService(
        judge, config.default_rubric, settings, config.limits, config.max_pending_items, config.low_confidence_below
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


def _shutdown(judge: Judge) -> None:
    for engine in judge.engines:
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
        _shutdown(judge)
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
        config.default_rubric,
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
    _shutdown(judge)
    log.info("stopped")
    return EXIT_ENGINE_DIED if died.is_set() else 0
