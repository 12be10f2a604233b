"""The masked second read on clean text: what bounding the reward by it does to honest
texts, and what it costs.

    python benchmarks/numeral_bound_bench.py --server HOST:PORT [--n 300] [--seed 0] [--out FILE]

Scores clean SummEval summaries (`summeval-coherence`) and Topical-Chat responses
(`topical-chat-coherence`) as written and, for those with a numeral, with their numerals
masked (numeral_mask.py), against a server started with `--no-masked-read-bound` so that
each read is the plain one. The bounded reward is min(plain, masked), as the server
computes it; change = bounded - plain, never above 0. --n 0 takes every text; otherwise a
random sample of n per set (seeded). The seconds of the plain calls and of the masked ones
give the cost: the share of extra reads, and their time beside the plain reads' time.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import statistics
import sys
import time

from geval_audit import datasets
from geval_client import RewardClient, make_item
from geval_server.numeral_mask import mask_numerals

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
SETS = {"SummEval summaries": (datasets.summeval, "summeval-coherence"),
        "Topical-Chat responses": (datasets.topical_chat, "topical-chat-coherence")}
BATCH = 64


def _rewards(client, items, rubric: str) -> tuple[list[float], float]:
    started, rewards = time.monotonic(), []
    for at in range(0, len(items), BATCH):
        results = client.score(items[at:at + BATCH], rubrics=[rubric])
        failed = [r.error.message for r in results if not r.ok]
        if failed:
            raise SystemExit(f"{len(failed)} items failed: {failed[0]}")
        rewards += [r.reward for r in results]
    return rewards, time.monotonic() - started


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(client, name: str, n: int, seed: int) -> list[str]:
    load, rubric = SETS[name]
    records = load()
    if n:
        records = random.Random(seed).sample(records, min(n, len(records)))
    masked = [mask_numerals(r.text) for r in records]
    plain, plain_s = _rewards(client, [make_item(r.source, r.text) for r in records], rubric)
    with_numeral = [i for i, (_, count) in enumerate(masked) if count]
    second, masked_s = _rewards(client, [make_item(records[i].source, masked[i][0]) for i in with_numeral], rubric)
    bounded = list(plain)
    for i, reward in zip(with_numeral, second):
        bounded[i] = min(plain[i], reward)
    changes = [b - p for b, p in zip(bounded, plain)]
    lowered = [c for c in changes if c < 0]
    return [
        f"| {name} ({'all' if not n else f'random {len(records)}, seed {seed}'}) | {len(records)} "
        f"| {len(with_numeral) / len(records):.0%} | {statistics.mean(changes):+.4f} "
        f"| {_quantile(changes, 0.5):+.4f} | {_quantile(changes, 0.1):+.4f} | {_quantile(changes, 0.01):+.4f} "
        f"| {min(changes):+.4f} | {len(lowered) / len(records):.0%} "
        f"| {sum(c < -0.05 for c in changes) / len(records):.1%} "
        f"| {len(records) / plain_s:.2f} / {len(records) / (plain_s + masked_s):.2f} |"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="a server started with --no-masked-read-bound")
    parser.add_argument("--n", type=int, default=300, help="texts per set, a random sample (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS / "numeral_bound.md")
    args = parser.parse_args()
    rows = []
    with RewardClient(args.server, timeout=7200) as client:
        judge = client.info().judge_model
        for name in SETS:
            rows += measure(client, name, args.n, args.seed)
            print(rows[-1], flush=True)
    report = [
        "# The masked second read on clean text",
        "",
        f"Command: `{' '.join(['python benchmarks/numeral_bound_bench.py', *sys.argv[1:]])}`",
        f"Judge: {judge}; {time.strftime('%Y-%m-%d')}; shared machine. change = min(plain, masked) - plain.",
        "",
        "| set | texts | with a numeral | mean change | median | 10th pct | 1st pct | min | lowered "
        "| lowered > 0.05 | items/s: plain / with the second read |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]
    args.out.write_text("\n".join(report) + "\n", encoding="utf-8")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
