"""The bounded second read on clean text: what bounding the reward by it does to honest
texts, and what it costs.

    python benchmarks/bench_numeral_bound.py --server HOST:PORT [--n 300] [--seed 0] [--out FILE]

Scores clean SummEval summaries (`summeval-coherence`), Topical-Chat responses
(`topical-chat-coherence`) and QAGS CNN/DM and XSum summaries (`summeval-consistency`)
against a server with the bound on (the default); change = reward - plain_reward, what
the bound took off (never above 0). --n 0 takes every text; otherwise a random sample of
n per set (seeded). "Read twice": the texts the bound changes (defences/chain.py with the
server's criteria: a criterion's name, the form's heading or a numeral). Cost: the first
--cost-items texts read twice: half scored as written (two reads each), the other half
already as the bound writes them (one read, nothing left to change), alternating, their
sources cached first (_cost).
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
from geval_server.defences.chain import Defences, DefenceSettings, defences_for

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
SETS = {"SummEval summaries": (datasets.summeval, "summeval-coherence"),
        "Topical-Chat responses": (datasets.topical_chat, "topical-chat-coherence"),
        "QAGS CNN/DM summaries": (lambda: datasets.qags("cnndm"), "summeval-consistency"),
        "QAGS XSum summaries": (lambda: datasets.qags("xsum"), "summeval-consistency")}
BATCH = 64
COST_CHUNK = 8  # texts whose sources are cached at once: well inside the 2 GiB KV cache


def _results(client, items, rubric: str) -> tuple[list, float]:
    started, results = time.monotonic(), []
    for at in range(0, len(items), BATCH):
        batch = client.score(items[at:at + BATCH], rubrics=[rubric])
        failed = [r.error.message for r in batch if not r.ok]
        if failed:
            raise SystemExit(f"{len(failed)} items failed: {failed[0]}")
        results += batch
    return results, time.monotonic() - started


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _bounded(defences: Defences, text: str) -> str | None:
    """The text the bound reads a second time, None where it reads it once."""
    return defences.bounded(defences.removed(text)[0])


def measure(client, defences: Defences, name: str, n: int, seed: int, cost_items: int) -> tuple[str, str]:
    """(the clean-text row, the cost row) of one set; n -1 times the cost probe alone."""
    load, rubric = SETS[name]
    everything = load()
    order = random.Random(seed).sample(everything, len(everything))
    # The cost probe reads texts this run did not score: the server's read memo would answer
    # those at once. --n -K probes only, after the first K texts (those `--n K` scored).
    records, unscored = (order[:n], order[n:]) if n > 0 else (everything, []) if n == 0 else ([], order[-n:])
    probe = [r for r in unscored if _bounded(defences, r.text) is not None][:cost_items]
    if n < 0:
        return "", _cost(client, defences, name, probe, rubric)
    read_twice = [r for r in records if _bounded(defences, r.text) is not None]
    results, seconds = _results(client, [make_item(r.source, r.text) for r in records], rubric)
    changes = [r.reward - r.plain_reward for r in results]
    lowered = [c for c in changes if c < 0]
    sample = f"all {len(records)}" if not n else f"random {len(records)} of {len(load())}, seed {seed}"
    row = (f"| {name} ({sample}) | {len(read_twice) / len(records):.0%} | {statistics.mean(changes):+.4f} "
           f"| {_quantile(changes, 0.5):+.4f} | {_quantile(changes, 0.1):+.4f} | {_quantile(changes, 0.01):+.4f} "
           f"| {min(changes):+.4f} | {len(lowered) / len(records):.0%} "
           f"| {sum(c < -0.05 for c in changes) / len(records):.1%} | {len(records) / seconds:.2f} |")
    return row, _cost(client, defences, name, probe, rubric) if probe else ""


def _cost(client, defences: Defences, name: str, probe, rubric: str) -> str:
    """Texts the bound reads twice, timed as written (the plain read and the bounded one)
    against other such texts already bounded (one read, what a server without the bound pays), on
    the same server with each chunk's sources cached first: a text's two reads must not
    find each other's prompt in the cache, so no text is timed both ways."""
    seconds = {"bound": 0.0, "once": 0.0}
    texts = {"bound": 0, "once": 0}
    # A source no earlier call sent: the server's read memo must not answer a timed read.
    fresh = f"\n\n(read {time.time_ns()})"
    for at in range(0, len(probe), COST_CHUNK):
        chunk = probe[at:at + COST_CHUNK]
        _results(client, [make_item(r.source + fresh, "A summary.") for r in chunk], rubric)  # sources into the cache
        halves = {"bound": [make_item(r.source + fresh, r.text) for r in chunk[0::2]],
                  "once": [make_item(r.source + fresh, _bounded(defences, r.text)) for r in chunk[1::2]]}
        for way in (("bound", "once") if at // COST_CHUNK % 2 == 0 else ("once", "bound")):
            seconds[way] += _results(client, halves[way], rubric)[1]
            texts[way] += len(halves[way])
    bound, once = texts["bound"] / seconds["bound"], texts["once"] / seconds["once"]
    return f"| {name} | {texts['bound']} + {texts['once']} | {once:.2f} | {bound:.2f} | {once / bound:.2f}x |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="a server with the masked-read bound on (the default)")
    parser.add_argument("--cost-items", type=int, default=64,
                        help="texts with a numeral timed, half with the bound and half without")
    parser.add_argument("--n", type=int, default=300,
                        help="texts per set, a random sample (0: all, and no cost probe unless the server runs "
                             "with --read-memo-size 0; -K: only the cost probe, on texts a run of --n K did not score)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated names of the sets measured")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS / "numeral_bound.md")
    args = parser.parse_args()
    rows, costs = [], []
    with RewardClient(args.server, timeout=7200) as client:
        info = client.info()
        judge = info.judge_model
        criteria = frozenset(r.geval.criterion for r in info.rubrics if r.HasField("geval"))
        defences = defences_for(criteria, DefenceSettings())
        for name in args.sets.split(","):
            row, cost = measure(client, defences, name, args.n, args.seed, args.cost_items)
            rows += [row] if row else []
            costs += [cost] if cost else []
            print(row, cost, sep="\n", flush=True)
    report = [
        "# The bounded second read on clean text",
        "",
        f"Command: `{' '.join(['python benchmarks/bench_numeral_bound.py', *sys.argv[1:]])}`",
        f"Judge: {judge}; {time.strftime('%Y-%m-%d')}; shared machine. change = reward - plain_reward = "
        "min(plain, masked) - plain.",
        "",
        "| set | read twice | mean change | median | 10th pct | 1st pct | min | lowered "
        "| lowered by > 0.05 | items/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "Cost: texts the bound reads twice, half scored as written (two reads) and half already as the bound "
        "writes them (one read), in alternating chunks of 8 whose sources were cached first.",
        "",
        "| set | texts (as written + masked) | items/s, one read | items/s, with the second read | time |",
        "|---|---:|---:|---:|---:|",
        *costs,
    ]
    args.out.write_text("\n".join(report) + "\n", encoding="utf-8")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
