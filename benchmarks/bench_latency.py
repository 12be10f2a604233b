"""Benchmark 4: latency of one 64-item Score call, p50 and p95, at 1 and 4 clients.

Every call is a fresh GRPO step (8 new SummEval articles x 8 summaries), so no
call is served from another's cache; the rubric prefix is warm, as in a running
server. With 1 client the calls go one after another; with 4 clients each sends
its calls in turn, all four at once.

    python benchmarks/bench_latency.py [--port 50404] [--calls 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

import common


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50404)
    parser.add_argument("--calls", type=int, default=4, help="calls per concurrency level")
    args = parser.parse_args()
    if 2 * args.calls * 8 + 1 > 100:
        parser.error("--calls: SummEval has 100 articles, 8 per call, so at most 6")
    info = common.machine()
    docs = common.summeval_docs()
    per_level = {
        clients: common.calls(common.grpo_batch(docs[offset * args.calls * 8 : (offset + 1) * args.calls * 8]))
        for offset, clients in enumerate((1, 4))
    }
    warm = [{"prompt": docs[-1].article, "completion": docs[-1].summaries[0]}]

    async def run() -> dict[int, list[float]]:
        with common.geval_server(args.port, log_name="bench_latency-server") as (address, _):
            await common.score_concurrently(address, [warm], 1)
            return {clients: await common.score_concurrently(address, batches, clients)
                    for clients, batches in per_level.items()}

    latencies = asyncio.run(run())
    rows = [[clients, len(values), round(percentile(values, 0.5), 2), round(percentile(values, 0.95), 2),
             round(min(values), 2), round(max(values), 2), round(statistics.mean(values), 2)]
            for clients, values in latencies.items()]
    common.report(
        "bench_latency",
        "4. Latency of one 64-item Score call",
        ["concurrent clients", "calls", "p50 s", "p95 s", "min s", "max s", "mean s"],
        rows,
        {"rubric": common.RUBRIC, "judge": "SmolLM2-135M-Instruct (embedded)", **common.engine_settings(),
         "items": "SummEval, 8 new articles x 8 distinct summaries per call"},
        notes=["With few calls p95 is close to the maximum; raise --calls for more samples.",
               "With 4 clients the four calls share the engine: they finish one after another, the last "
               "after about four times a single call's time, while the items/s stay the same (see bench_ceiling)."],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
