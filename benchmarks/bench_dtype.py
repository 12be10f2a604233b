"""Number formats on this CPU: the server's default (chosen for the processor) beside
`--dtype float32` and `--dtype bfloat16`, side by side in one run on the same items.

Fresh servers in the order float32, bfloat16, default, bfloat16, float32, so a drift in
the machine's load favours none. Each scores a warm-up item of another article (the
rubric's prefix then sits in the cache), then one Score call of 8 SummEval articles x 8
summaries (a GRPO step). Reported: start-up, items/s and CPU per item per format, their
ratios to float32, and how far bfloat16 moves the rewards from float32's: mean and
largest |difference|, Spearman over the items, and the same between the two float32
servers (what run-to-run noise alone gives).

    python benchmarks/bench_dtype.py [--port 50411] [--articles 8]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

import common
from scipy.stats import spearmanr

# Where bfloat16 is converted in software one engine step can outlast vLLM's limit of 300 s
# (it did here, beside other engines), which kills the engine: every server gets more room.
ENVIRONMENT = {"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "7200"}
SETTINGS = {"--dtype float32": ("--dtype", "float32"), "--dtype bfloat16": ("--dtype", "bfloat16"), "default": ()}
ORDER = ["--dtype float32", "--dtype bfloat16", "default", "--dtype bfloat16", "--dtype float32"]


def drift(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """Mean and largest |a - b|, and Spearman's rank correlation of a and b."""
    differences = [abs(x - y) for x, y in zip(a, b)]
    return statistics.mean(differences), max(differences), float(spearmanr(a, b).statistic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50411)
    parser.add_argument("--articles", type=int, default=8, help="the batch: this many articles x 8 summaries")
    args = parser.parse_args()
    info = common.machine()
    docs = common.summeval_docs()
    items = common.grpo_batch(docs[: args.articles])
    warm = [{"prompt": docs[-1].article, "completion": docs[-1].summaries[0]}]
    runs: dict[str, list[common.ServerRun]] = {name: [] for name in SETTINGS}
    for index, name in enumerate(ORDER):
        print(f"{name}: server {index + 1} of {len(ORDER)}", flush=True)
        run = asyncio.run(common.score_on_fresh_server(args.port, SETTINGS[name], items, warm, f"bench_dtype-{index}",
                                                  ENVIRONMENT))
        print(f"  ready in {run.start_seconds:.0f} s, {len(items)} items in {run.seconds:.1f} s, "
              f"dtype {run.settings['dtype']}", flush=True)
        runs[name].append(run)

    n = len(items)
    f32_seconds = statistics.mean(run.seconds for run in runs["--dtype float32"])
    f32_cpu = statistics.mean(run.cpu_seconds for run in runs["--dtype float32"])
    rows = []
    for name, measured in runs.items():
        seconds = statistics.mean(run.seconds for run in measured)
        cpu = statistics.mean(run.cpu_seconds for run in measured)
        rows.append([f"{name} ({measured[0].settings['dtype']})", len(measured),
                     round(statistics.mean(run.start_seconds for run in measured)),
                     round(n / seconds, 3), round(f32_seconds / seconds, 2),
                     round(cpu / n, 3), round(f32_cpu / cpu, 2)])
    f32, bf16 = runs["--dtype float32"][0], runs["--dtype bfloat16"][0]
    reward = drift(f32.rewards, bf16.rewards)
    score = drift(f32.expected_scores, bf16.expected_scores)
    noise = drift(*(run.rewards for run in runs["--dtype float32"]))
    default = runs["default"][0].settings
    common.report(
        "bench_dtype",
        "11. Number formats: float32 vs bfloat16 vs the server's default",
        ["server", "fresh servers", "start-up s", "items/s", "items/s vs float32", "CPU s/item",
         "CPU vs float32 (above 1: less)"],
        rows,
        {"rubric": common.RUBRIC, "judge": "SmolLM2-135M-Instruct (embedded)", **common.engine_settings(),
         "items": f"SummEval, {args.articles} articles x 8 summaries in one Score call", **ENVIRONMENT},
        notes=[
            f"Default: {default['dtype']} ({default['dtype_reason']}).",
            f"Rewards (0-1), bfloat16 against float32 over the same {n} items: mean |difference| {reward[0]:.4f}, "
            f"largest {reward[1]:.4f}, Spearman {reward[2]:.3f}; E[s] (1-5): mean |difference| {score[0]:.3f}, "
            f"largest {score[1]:.3f}. Between the two float32 servers: largest |difference| {noise[1]:.1e}.",
            "Order float32, bfloat16, default, bfloat16, float32 (fresh servers); each figure is the mean of its "
            "servers. CPU: every process of the server over the timed call.",
        ],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
