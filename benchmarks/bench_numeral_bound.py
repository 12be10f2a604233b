"""The bound on clean text: what the bounded read does to honest texts' rewards.

    python benchmarks/bench_numeral_bound.py [--n 150] [--seed 0] [--sets ...] [--out FILE]
        [--server HOST:PORT --unbounded-server HOST:PORT]

Scores clean SummEval summaries (`summeval-coherence`), Topical-Chat responses
(`topical-chat-coherence`) and QAGS CNN/DM and XSum summaries (`summeval-consistency`) on
two servers: the default (the bound on) and one with `--no-masked-read-bound` (the text as
written, read once). change = bounded reward - unbounded reward per text. Without the
server flags it starts both with the embedded judge in float32, so the change is the
bound's and not the number format's batch-to-batch rounding. --n 0 takes every text;
otherwise a random sample of n per set (seeded). How each text is read follows
defences/chain.py with the server's criteria: as written (the bound changes nothing),
masked once (every numeral its source holds), or both, the lower kept.
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import random
import statistics
import sys
import time

from geval_audit import datasets
from geval_client import RewardClient, make_item
from geval_server.defences.chain import Defences, DefenceSettings, defences_for
from geval_server.launcher import running_server

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
SETS = {"SummEval summaries": (datasets.summeval, "summeval-coherence"),
        "Topical-Chat responses": (datasets.topical_chat, "topical-chat-coherence"),
        "QAGS CNN/DM summaries": (lambda: datasets.qags("cnndm"), "summeval-consistency"),
        "QAGS XSum summaries": (lambda: datasets.qags("xsum"), "summeval-consistency")}
BATCH = 64
SERVE = ("--dtype", "float32")


def _rewards(client, items, rubric: str) -> list[float]:
    rewards = []
    for at in range(0, len(items), BATCH):
        batch = client.score(items[at:at + BATCH], rubrics=[rubric])
        failed = [r.error.message for r in batch if not r.ok]
        if failed:
            raise SystemExit(f"{len(failed)} items failed: {failed[0]}")
        rewards += [r.reward for r in batch]
    return rewards


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _way(defences: Defences, record) -> str:
    """How the bounded server reads the text: `as written`, `masked once` or `twice`."""
    removed = defences.removed(record.text)[0]
    reads = defences.reads(removed, record.source)
    if reads.second is not None:
        return "twice"
    return "as written" if reads.first == removed else "masked once"


def measure(bounded, unbounded, defences: Defences, name: str, n: int, seed: int) -> str:
    """The set's row."""
    load, rubric = SETS[name]
    everything = load()
    records = everything if n == 0 else random.Random(seed).sample(everything, min(n, len(everything)))
    ways = [_way(defences, r) for r in records]
    items = [make_item(r.source, r.text) for r in records]
    changes = [b - u for b, u in zip(_rewards(bounded, items, rubric), _rewards(unbounded, items, rubric))]
    share = {way: ways.count(way) / len(records) for way in ("masked once", "twice")}
    sample = f"all {len(records)}" if not n else f"random {len(records)} of {len(everything)}, seed {seed}"
    return (f"| {name} ({sample}) | {share['masked once']:.0%} | {share['twice']:.0%} "
            f"| {statistics.mean(changes):+.4f} | {statistics.mean(abs(c) for c in changes):.4f} "
            f"| {_quantile(changes, 0.01):+.4f} | {_quantile(changes, 0.5):+.4f} | {_quantile(changes, 0.99):+.4f} "
            f"| {sum(c < -0.05 for c in changes) / len(records):.1%} "
            f"| {sum(c > 0.05 for c in changes) / len(records):.1%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", help="a server with the bound on (the default); with --unbounded-server")
    parser.add_argument("--unbounded-server", help="the same server started with --no-masked-read-bound")
    parser.add_argument("--n", type=int, default=150, help="texts per set, a random sample (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated names of the sets measured")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS / "numeral_bound.md")
    args = parser.parse_args()
    if (args.server is None) != (args.unbounded_server is None):
        parser.error("--server and --unbounded-server go together")
    rows = []
    with contextlib.ExitStack() as stack:
        addresses = (args.server, args.unbounded_server) if args.server else (
            stack.enter_context(running_server(*SERVE)),
            stack.enter_context(running_server(*SERVE, "--no-masked-read-bound")))
        bounded, unbounded = (stack.enter_context(RewardClient(a, timeout=7200)) for a in addresses)
        info = bounded.info()
        criteria = frozenset(r.geval.criterion for r in info.rubrics if r.HasField("geval"))
        defences = defences_for(criteria, DefenceSettings())
        for name in args.sets.split(","):
            rows.append(measure(bounded, unbounded, defences, name, args.n, args.seed))
            print(rows[-1], flush=True)
    report = [
        "# The bound on clean text",
        "",
        f"Command: `{' '.join(['python benchmarks/bench_numeral_bound.py', *sys.argv[1:]])}`",
        f"Judge: {info.judge_model}; {time.strftime('%Y-%m-%d')}. change = reward with the bound - reward "
        "without it (the text as written, read once), per text.",
        "",
        "| set | read once, masked | read twice | mean change | mean abs change | 1st pct | median | 99th pct "
        "| lowered by > 0.05 | raised by > 0.05 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]
    args.out.write_text("\n".join(report) + "\n", encoding="utf-8")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
