"""Compiled graphs on this CPU: the server's default (vLLM's torch.compile) beside
`--enforce-eager` (eager PyTorch), side by side in one run on the same items, and both
against a float32 reference.

Fresh servers in the order compiled, eager, compiled, eager, then the reference (eager,
`--dtype float32`). The compiled servers share a compile cache of their own, empty before
the first: the first start-up pays the whole compilation, the second reads the cache, as a
restarted server would. On each server: a warm-up item of another article, then two Score
calls of 8 SummEval articles x 8 summaries (a GRPO step) on different articles: the first
shows any compilation left to the first call of a batch size, the second the steady speed.
Reported: start-up, items/s and CPU per item of each call, and each one's rewards against
the float32 reference's (the number format's rounding, compiled or not).

    python benchmarks/bench_compile.py [--port 50413] [--articles 8]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

import common

COMPILED, EAGER, REFERENCE = "compiled (default)", "eager (--enforce-eager)", "float32 reference (eager)"
SETTINGS = {COMPILED: (), EAGER: ("--enforce-eager",), REFERENCE: ("--enforce-eager", "--dtype", "float32")}
ORDER = [COMPILED, EAGER, COMPILED, EAGER, REFERENCE]


async def one_server(port: int, serve_args: tuple[str, ...], env: dict[str, str], calls: list[list[dict]],
                     warm: list[dict], label: str) -> dict:
    """Start-up seconds, and per call (wall s, CPU s, rewards)."""
    from geval_client import AsyncRewardClient

    started = time.perf_counter()
    with common.geval_server(port, *serve_args, log_name=label, env=env) as (address, pid):
        start_seconds = time.perf_counter() - started
        timings = []
        async with AsyncRewardClient(address, timeout=3600) as client:
            await client.score(warm, rubrics=common.RUBRIC)
            for items in calls:
                async with common.timed([pid]) as t:
                    results = await client.score(items, rubrics=common.RUBRIC)
                timings.append((t.seconds, t.cpu_seconds, [r.reward for r in results]))
    return {"start": start_seconds, "calls": timings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50413)
    parser.add_argument("--articles", type=int, default=8, help="each call: this many articles x 8 summaries")
    args = parser.parse_args()
    info = common.machine()
    docs = common.summeval_docs()
    calls = [common.grpo_batch(docs[:args.articles]), common.grpo_batch(docs[args.articles:2 * args.articles])]
    warm = [{"prompt": docs[-1].article, "completion": docs[-1].summaries[0]}]
    runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    with tempfile.TemporaryDirectory(prefix="vllm-compile-cache-") as cache:
        for index, name in enumerate(ORDER):
            env = {"VLLM_CACHE_ROOT": cache}
            print(f"{name}: server {index + 1} of {len(ORDER)}", flush=True)
            run = asyncio.run(one_server(args.port, SETTINGS[name], env, calls, warm, f"bench_compile-{index}"))
            print(f"  ready in {run['start']:.0f} s; calls " + ", ".join(
                f"{len(items)} items in {seconds:.1f} s" for items, (seconds, _, _) in zip(calls, run["calls"])),
                flush=True)
            runs[name].append(run)

    n = len(calls[0])
    compiled, eager, reference = (runs[name] for name in SETTINGS)
    rows = []
    for name, measured in runs.items():
        starts = [round(run["start"]) for run in measured]
        for call in range(len(calls)):
            seconds = statistics.mean(run["calls"][call][0] for run in measured)
            cpu = statistics.mean(run["calls"][call][1] for run in measured)
            rows.append([name, " / ".join(map(str, starts)), f"{call + 1} ({'first' if call == 0 else 'steady'})",
                         round(n / seconds, 3), round(cpu / n, 3)])
    eager_start = statistics.mean(run["start"] for run in eager)
    steady = [statistics.mean(run["calls"][-1][0] for run in measured) for measured in (eager, compiled)]
    first = [statistics.mean(run["calls"][0][0] for run in measured) for measured in (eager, compiled)]

    def from_reference(measured: list[dict]) -> list[float]:
        return [abs(a - b) for run in measured for call in range(len(calls))
                for a, b in zip(run["calls"][call][2], reference[0]["calls"][call][2])]

    differences = {name: from_reference(runs[name]) for name in (COMPILED, EAGER)}
    common.report(
        "bench_compile",
        "12. Compiled graphs (the default) vs eager",
        ["server", "start-up s (each server)", "call", "items/s", "CPU s/item"],
        rows,
        {"rubric": common.RUBRIC, "judge": "SmolLM2-135M-Instruct (embedded)", **common.engine_settings(),
         "items": f"SummEval, two calls of {args.articles} articles x 8 summaries, other articles each"},
        notes=[
            f"Compiled over eager, items/s: {steady[0] / steady[1]:.2f}x in the steady call, "
            f"{first[0] / first[1]:.2f}x in the first; start-up {compiled[0]['start']:.0f} s with an empty compile "
            f"cache and {compiled[1]['start']:.0f} s with it filled, against {eager_start:.0f} s eager (mean).",
            *(f"Rewards, {name} against the float32 reference: mean |difference| {statistics.mean(d):.1e}, "
              f"largest {max(d):.1e}." for name, d in differences.items()),
            "Order compiled, eager, compiled, eager, reference (fresh servers); the compiled servers share a compile "
            "cache (VLLM_CACHE_ROOT) that is empty before the first. CPU: every process of the server over the call.",
        ],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
