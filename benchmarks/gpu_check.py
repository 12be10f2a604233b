"""The GPU check: the server on this machine's GPU, its rewards against a float32 reference taken
on a CPU, and its items/s beside `vllm serve` on the same GPU, in one command.

    python benchmarks/gpu_check.py [--judges embedded,8b] [--articles 64]
    python benchmarks/gpu_check.py --rewards-only        # the rewards alone, on any machine
    python benchmarks/gpu_check.py --write-reference     # the float32 reference (run on a CPU)

Rewards: `geval-reward serve` with the embedded judge and its defaults for this machine scores
the 64 reference items (SummEval, 8 articles x 8 summaries: the batch of benchmarks 2, 11, 12
and 14) as one Score call, and each reward is compared with results/gpu_check_reference.json:
the same items scored by the server with `--dtype float32 --enforce-eager` on a CPU. The check
passes within TOLERANCE.

Speed: per judge, a fresh server of ours and then a fresh `vllm serve` read the score slot of a
GRPO-shaped batch, 512 items by default (64 other articles x 8 summaries): ours as Score calls of
64 items, 8 in flight, `vllm serve` as one chat.completions request per item, all in flight,
pre-filled up to the score, reading the top-20 log-probabilities of the one token there
(common.vllm_serve_slot_reads). Each first reads one item of another article, so the rubric's
prefix sits in the cache. Judges: `embedded`, and `8b`, Llama-3-8B's shape with random weights
(vLLM's `--load-format dummy`) and the embedded judge's tokenizer, whose rewards mean nothing.

Prints the machine, the GPU, the versions and a table (start-up seconds, GPU memory at its
peak, items/s, ours against `vllm serve`) and writes results/gpu_check.json; exits 1 when the
rewards are out of tolerance.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

import common

REFERENCE = common.RESULTS_DIR / "gpu_check_reference.json"
REFERENCE_ARTICLES = 8  # x 8 summaries: the reference items
SUMMARIES = 8
CALLS_IN_FLIGHT = 8  # ours: Score calls of common.ITEMS_PER_CALL items sent at once
JUDGES = ("embedded", "8b")



@dataclass(frozen=True)
class Tolerance:
    """How far a GPU's rewards (0-1) may be from the float32 reference on the 64 items. bfloat16
    against float32 on CPU: mean |difference| 0.0049 to 0.0077, largest 0.013 to 0.026, Spearman
    0.990 (benchmarks/RESULTS.md 11 and 12; 0.0077, 0.019 here against this reference, AMD EPYC).
    A GPU rounds as bfloat16 does but sums in another order (its kernels, its batch shapes), so the
    bounds leave half as much again. A judge that reads the wrong completion of the right article
    fails them: 200 shuffles of the reference within each article gave mean |difference| 0.016 to
    0.02 (0.065 at the largest) and Spearman 0.82 (0.89 at best); the rewards span 0.17 to 0.35."""

    mean: float = 0.012
    largest: float = 0.04
    spearman: float = 0.95


@dataclass(frozen=True)
class Agreement:
    """The rewards of a run against the reference's, item by item."""

    items: int
    mean: float
    largest: float
    worst: str  # the item furthest from the reference
    spearman: float
    tolerance: Tolerance

    @property
    def passed(self) -> bool:
        bound = self.tolerance
        return self.mean <= bound.mean and self.largest <= bound.largest and self.spearman >= bound.spearman

    def line(self) -> str:
        bound = self.tolerance
        verdict = "within" if self.passed else "OUT OF"
        return (f"rewards against the float32 reference, {self.items} items: mean |difference| {self.mean:.4f}, "
                f"largest {self.largest:.4f} ({self.worst}), Spearman {self.spearman:.3f}; {verdict} tolerance "
                f"(mean <= {bound.mean}, largest <= {bound.largest}, Spearman >= {bound.spearman})")


def ranks(values: list[float]) -> list[float]:
    """Each value's rank from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranked = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranked[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranked


def spearman(a: list[float], b: list[float]) -> float:
    return statistics.correlation(ranks(a), ranks(b))


def item_key(doc: common.Doc, summary: str) -> str:
    """An item's name in the reference: its article and a digest of its summary."""
    return f"{doc.doc_id}/{hashlib.sha256(summary.encode()).hexdigest()[:12]}"


def keyed_batch(docs: list[common.Doc]) -> tuple[list[dict], list[str]]:
    """The GRPO batch of `docs` (each with 8 distinct summaries) and each item's key."""
    items = common.grpo_batch(docs, SUMMARIES)
    keys = [item_key(doc, summary) for doc in docs for summary in doc.distinct_summaries()[:SUMMARIES]]
    return items, keys


def compare(reference: dict, keys: list[str], rewards: list[float], tolerance: Tolerance = Tolerance()) -> Agreement:
    """The rewards of `keys` against the reference's for the same items; an error where the
    reference holds other items (a changed data set or batch), never a pass."""
    expected = dict(zip(reference["keys"], reference["rewards"]))
    if sorted(keys) != sorted(expected):
        raise ValueError(f"the reference ({REFERENCE.name}) holds other items than these {len(keys)}: "
                         "write it again with --write-reference")
    differences = {key: abs(reward - expected[key]) for key, reward in zip(keys, rewards)}
    worst = max(differences, key=differences.get)
    return Agreement(len(keys), statistics.mean(differences.values()), differences[worst], worst,
                     spearman(rewards, [expected[key] for key in keys]), tolerance)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", default=",".join(JUDGES),
                        type=lambda text: [j for j in text.split(",") if j],
                        help=f"comma-separated, of {', '.join(JUDGES)} (default: both)")
    parser.add_argument("--articles", type=int, default=64, help="the speed batch: this many articles x 8 summaries")
    parser.add_argument("--rewards-only", action="store_true", help="the rewards against the reference, no speed")
    parser.add_argument("--write-reference", action="store_true",
                        help=f"score the reference items in float32 and write {REFERENCE.name} (run on a CPU)")
    parser.add_argument("--on-cpu", action="store_true",
                        help="run without a GPU (the embedded judge only): the script's path, a CPU's figures")
    parser.add_argument("--port", type=int, default=50460)
    parser.add_argument("--vllm-port", type=int, default=50461)
    args = parser.parse_args(argv)
    unknown = [j for j in args.judges if j not in JUDGES]
    if unknown or not args.judges:
        parser.error(f"--judges: {', '.join(unknown) or 'none'}: choose from {', '.join(JUDGES)}")
    if not 1 <= args.articles <= 91:
        parser.error("--articles: 1 to 91 (SummEval's 100 articles, less the reference's 8 and the warm-up's)")
    return args


# ---- the GPU -------------------------------------------------------------------------------


def gpus() -> list[dict[str, str]]:
    """The machine's NVIDIA GPUs as nvidia-smi lists them; none without nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    fields = ("index", "name", "memory_mib", "driver")
    return [dict(zip(fields, (v.strip() for v in line.split(",")))) for line in out.stdout.strip().splitlines()]


class GpuMemoryPeak:
    """The most memory GPU `index` held while the block ran (nvidia-smi, every 0.5 s); None
    without a GPU (index None)."""

    def __init__(self, index: str | None) -> None:
        self.index, self.peak_mib = index, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            out = subprocess.run(["nvidia-smi", f"--id={self.index}", "--query-gpu=memory.used",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip():
                self.peak_mib = max(self.peak_mib or 0, int(out.stdout.strip().splitlines()[0]))
            self._stop.wait(0.5)

    def __enter__(self) -> GpuMemoryPeak:
        if self.index is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def visible_gpu_index() -> str:
    return os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"


# ---- the runs ------------------------------------------------------------------------------


@dataclass
class Run:
    judge: str
    server: str
    start_seconds: float
    items: int
    seconds: float
    gpu_peak_mib: int | None
    settings: dict[str, str]


async def ours(port: int, judge: str, serve_args: list[str], warm: list[dict], speed: list[dict],
               reference: list[dict], gpu: str | None) -> tuple[Run, list[float]]:
    """A fresh `geval-reward serve`: the warm-up item, the reference items (one call; their
    rewards returned), then the speed batch unless it is empty."""
    from geval_client import AsyncRewardClient

    with GpuMemoryPeak(gpu) as memory:
        started = time.perf_counter()
        with common.geval_server(port, *serve_args, log_name=f"gpu_check-ours-{judge}") as (address, pid):
            start_seconds = time.perf_counter() - started
            async with AsyncRewardClient(address, timeout=3600) as client:
                await client.score(warm, rubrics=common.RUBRIC)
                rewards = []
                if reference:
                    results = await client.score(reference, rubrics=common.RUBRIC)
                    failed = [r.error.message for r in results if not r.ok]
                    if failed:
                        raise RuntimeError(f"{len(failed)} reference items failed, e.g. {failed[0]}")
                    rewards = [r.reward for r in results]
                settings = dict((await client.info()).engine_settings)
            async with common.timed([pid]) as batch:
                if speed:
                    await common.score_concurrently(address, common.calls(speed), CALLS_IN_FLIGHT)
    run = Run(judge, "ours", start_seconds, len(speed), batch.seconds, memory.peak_mib, settings)
    return run, rewards


async def vllm_serve(port: int, judge: str, model: str, settings: dict[str, Any], warm: list[dict],
                     speed: list[dict], prompts: common.JudgePrompts, gpu: str | None) -> Run:
    with GpuMemoryPeak(gpu) as memory:
        reads = await common.vllm_serve_slot_reads(port, model, settings, None, speed, warm, prompts,
                                                   f"gpu_check-vllm-{judge}")
    shown = {k: str(v) for k, v in settings.items()} or {"settings": "vLLM's defaults"}
    return Run(judge, "vllm serve", reads.start_seconds, len(speed), reads.timed.seconds,
               memory.peak_mib, shown)


def write_reference(port: int) -> None:
    docs = common.summeval_docs()
    items, keys = keyed_batch(docs[:REFERENCE_ARTICLES])
    warm = [{"prompt": docs[-1].article, "completion": docs[-1].summaries[0]}]
    info = common.machine()
    run, rewards = asyncio.run(ours(port, "embedded", ["--dtype", "float32", "--enforce-eager"], warm, [], items,
                                    None))
    REFERENCE.write_text(json.dumps({
        "what": "rewards of the reference items, the embedded judge in float32 on a CPU (benchmarks/gpu_check.py)",
        "when": time.strftime("%Y-%m-%d %H:%M"), "machine": info, "rubric": common.RUBRIC,
        "settings": run.settings, "keys": keys, "rewards": rewards,
    }, indent=1) + "\n")
    print(f"wrote {REFERENCE}: {len(rewards)} rewards, {info['cpu']}, dtype {run.settings.get('dtype')}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.write_reference:
        write_reference(args.port)
        return 0
    judges = ["embedded"] if args.rewards_only else args.judges
    found = gpus()
    if not found and not (args.on_cpu or args.rewards_only):
        sys.exit("no GPU: nvidia-smi lists none. --rewards-only checks the rewards on any machine; "
                 "--on-cpu --judges embedded runs the whole check on a CPU")
    if not found and "8b" in judges:
        sys.exit("no GPU: the 8B-shaped judge needs one (15 GB of weights); give --judges embedded")
    gpu = visible_gpu_index() if found else None
    docs = common.summeval_docs()
    reference_items, reference_keys = keyed_batch(docs[:REFERENCE_ARTICLES])
    speed = [] if args.rewards_only else common.grpo_batch(docs[REFERENCE_ARTICLES:REFERENCE_ARTICLES + args.articles])
    warm = [{"prompt": docs[-1].article, "completion": docs[-1].summaries[0]}]
    reference = json.loads(REFERENCE.read_text())
    import torch

    info = {**common.machine(), "cuda": torch.version.cuda,
            "gpu": "; ".join(f"{g['name']} ({int(g['memory_mib']) / 1024:.0f} GiB, driver {g['driver']})"
                             for g in found) or "none"}
    prompts = None if args.rewards_only else common.JudgePrompts()
    # vllm serve on a CPU reserves a share of host memory unless given a KV size (defaults.py).
    from geval_server.engine.defaults import CPU_KV_CACHE_BYTES

    vllm_settings: dict[str, Any] = {} if found else {"kv_cache_memory_bytes": CPU_KV_CACHE_BYTES}
    runs: list[Run] = []
    agreement = None
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        for judge in judges:
            if judge == "embedded":  # ours as users start it: no model named
                model, serve_args = common.embedded_model_path(), []
            else:
                model = str(common.write_random_judge(pathlib.Path(scratch) / "llama3-8b-shaped",
                                                      pathlib.Path(common.embedded_model_path()), "llama-3-8b"))
                serve_args = [model, "--load-format", "dummy"]
            run, rewards = asyncio.run(ours(args.port, judge, serve_args, warm, speed,
                                            reference_items if judge == "embedded" else [], gpu))
            runs.append(run)
            if judge == "embedded":
                agreement = compare(reference, reference_keys, rewards)
                print(f"{agreement.line()}; dtype {run.settings.get('dtype')}", flush=True)
            if speed:
                print(f"ours, {judge}: {len(speed) / run.seconds:.1f} items/s", flush=True)
                settings = {**vllm_settings, **({"load_format": "dummy"} if serve_args else {})}
                theirs = asyncio.run(vllm_serve(args.vllm_port, judge, model, settings, warm, speed, prompts, gpu))
                runs.append(theirs)
                print(f"vllm serve, {judge}: {len(speed) / theirs.seconds:.1f} items/s", flush=True)
    report(args, judges, runs, agreement, reference, info)
    return 0 if agreement is None or agreement.passed else 1


def table_rows(runs: list[Run]) -> list[list[Any]]:
    """Per run: judge, server, start-up s, GPU memory GiB at its peak, items/s, against `vllm serve`
    (the same judge's)."""
    rows = []
    for run in runs:
        theirs = next((r for r in runs if r.judge == run.judge and r.server == "vllm serve" and r.items), None)
        rate = run.items / run.seconds if run.items else None
        rows.append([run.judge, run.server, round(run.start_seconds),
                     "-" if run.gpu_peak_mib is None else f"{run.gpu_peak_mib / 1024:.1f}",
                     "-" if rate is None else round(rate, 1),
                     "-" if rate is None or theirs is None else f"{rate / (theirs.items / theirs.seconds):.2f}x"])
    return rows


def report(args: argparse.Namespace, judges: list[str], runs: list[Run], agreement: Agreement | None,
           reference: dict, info: dict[str, Any]) -> None:
    ours_settings = next((r.settings for r in runs if r.server == "ours"), {})
    notes = [f"Machine: {info['cpu']}, {info['cores']} cores; GPU: {info['gpu']}; torch {info['torch']} "
             f"(CUDA {info['cuda']}), vLLM {info['vllm']}, Python {info['python']}."]
    if agreement is not None:
        made = reference["machine"]
        notes.append(f"{agreement.line()}; the reference: {made['cpu']}, vLLM {made['vllm']}, {reference['when']}; "
                     f"served in {ours_settings.get('dtype')}.")
    if not args.rewards_only:
        notes.append(f"Speed batch: {args.articles} SummEval articles x {SUMMARIES} summaries; ours as Score calls "
                     f"of {common.ITEMS_PER_CALL}, {CALLS_IN_FLIGHT} in flight; vllm serve one request per item, all "
                     "in flight, top-20 log-probabilities of the score token. Each server fresh, one warm-up item of "
                     "another article first.")
    if "8b" in judges:
        notes.append("8b: Llama-3-8B's shape (hidden 4096, 32 layers, 32 heads, 8 KV heads, MLP 14336), random "
                     "weights (--load-format dummy), the embedded judge's tokenizer and vocabulary: its rewards "
                     "mean nothing.")
    notes += ["GPU memory: the most the GPU held while the server ran (nvidia-smi); vLLM takes 0.9 of it by default.",
              "Ours ran with: " + ", ".join(f"{k}={v}" for k, v in sorted(ours_settings.items())) + "."]
    common.report("gpu_check", "The GPU check: rewards against float32, items/s against vllm serve",
                  ["judge", "server", "start-up s", "GPU memory GiB (peak)", "items/s", "against vllm serve"],
                  table_rows(runs), {"judges": ",".join(judges), "articles": args.articles, "rubric": common.RUBRIC},
                  notes=notes, machine_info=info, results_md=False)


if __name__ == "__main__":
    sys.exit(main())
