"""Data parallel inside one server: each prompt's reads on one rank, the prefix-cache hit rate kept.

One GRPO-shaped Score call (the 8 longest SummEval articles x 8 summaries, two rubrics) on a
server with one data-parallel rank, then on one with more (`--data-parallel-size`), each
started fresh in float32 and warmed with other articles. vLLM's prefix-cache counters, per
rank, over the call give each server's hit rate and each rank's share of the prompt tokens;
the rewards are compared with the single rank's. On a CPU the ranks share the cores, so the
seconds say little there: the hit rates, the shares and the rewards are what it measures.

    python benchmarks/bench_data_parallel.py [--port 50404] [--ranks 2]
"""

from __future__ import annotations

import argparse
import re
import time
import urllib.request

import common

PROMPTS, COMPLETIONS = 8, 8
RUBRICS = ["summeval-coherence", "summeval-fluency"]


def cache_counts(metrics_port: int) -> dict[str, tuple[float, float]]:
    """Per rank: vLLM's prefix-cache queries (prompt tokens looked up) and hits (found cached)."""
    time.sleep(1.0)  # a step's counters reach the endpoint just after its outputs
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30).read().decode()
    counts: dict[str, list[float]] = {}
    for kind, column in (("queries", 0), ("hits", 1)):
        for rank, value in re.findall(rf'^vllm:prefix_cache_{kind}_total\{{[^}}]*engine="(\d+)"[^}}]*\}} (\S+)$',
                                      text, re.MULTILINE):
            counts.setdefault(rank, [0.0, 0.0])[column] = float(value)
    return {rank: (queries, hits) for rank, (queries, hits) in counts.items()}


def run(port: int, ranks: int, items: list[dict], warm: list[dict]) -> tuple[float, dict, list[float]]:
    """(seconds, per rank the call's (queries, hits), rewards) on a fresh server with `ranks` ranks."""
    from geval_client import RewardClient

    metrics_port = port + 1
    args = ["--dtype", "float32", "--data-parallel-size", str(ranks), "--metrics-port", str(metrics_port),
            "--kv-cache-memory-bytes", str(1 << 30), "--no-semscore"]
    with common.geval_server(port, *args, log_name=f"bench_data_parallel-{ranks}") as (address, _):
        with RewardClient(address, timeout=3600) as client:
            client.score(warm, rubrics=RUBRICS)
            before = cache_counts(metrics_port)
            started = time.perf_counter()
            results = client.score(items, rubrics=RUBRICS)
            seconds = time.perf_counter() - started
            after = cache_counts(metrics_port)
    failed = [r.error.message for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} items failed, e.g. {failed[0]}")
    taken = {rank: (after[rank][0] - before.get(rank, (0.0, 0.0))[0], after[rank][1] - before.get(rank, (0.0, 0.0))[1])
             for rank in after}
    print(f"{ranks} rank(s): {seconds:.1f} s, per rank (queries, hits) {taken}", flush=True)
    return seconds, taken, [r.reward for r in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50404, help="the server's port; its metrics on the next")
    parser.add_argument("--ranks", type=int, default=2, help="data-parallel ranks of the second server")
    args = parser.parse_args()
    info = common.machine()
    longest = sorted(common.summeval_docs(), key=lambda d: len(d.article), reverse=True)
    items = common.grpo_batch(longest[:PROMPTS], COMPLETIONS)
    warm = [{"prompt": doc.article, "completion": doc.summaries[0]} for doc in longest[-2 * args.ranks:]]
    measured = {ranks: run(args.port, ranks, items, warm) for ranks in (1, args.ranks)}
    single = measured[1][2]
    rows = []
    for ranks, (seconds, taken, rewards) in measured.items():
        queries = sum(q for q, _ in taken.values())
        hits = sum(h for _, h in taken.values())
        shares = " / ".join(f"{taken[rank][0] / queries:.0%}" for rank in sorted(taken, key=int))
        rows.append([ranks, f"{hits / queries:.1%}", shares, round(seconds, 1),
                     f"{max(abs(a - b) for a, b in zip(rewards, single)):.1e}"])
    common.report(
        "bench_data_parallel",
        "Data parallel inside one server: each prompt's reads on one rank",
        ["ranks", "prefix-cache hit rate", "prompt tokens per rank", "seconds", "max reward difference from 1 rank"],
        rows,
        {"rubrics": ",".join(RUBRICS), "judge": "SmolLM2-135M-Instruct (embedded)", "dtype": "float32",
         "call": f"{PROMPTS} SummEval articles x {COMPLETIONS} summaries, one Score call"},
        notes=["Hit rate: vLLM's prefix_cache_hits / prefix_cache_queries over the call, summed over ranks; each "
               "server fresh, warmed with other articles.",
               "On a CPU the ranks share its cores: the seconds are not a speed-up."],
        machine_info=info, level=4,
    )


if __name__ == "__main__":
    main()
