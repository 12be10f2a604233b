"""Load test (loopback only, bounded in count and time): many concurrent
clients send thousands of items; every item must come back exactly once, with a
result or an explicit error, and its reward must equal the reward of the same
item scored alone.

    python benchmarks/bench_load.py [--clients 16] [--items 2000] [--batch 25] [--solo 200] [--server HOST:PORT]

Without --server it starts the embedded judge itself. Writes benchmarks/results/bench_load.md.
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import random
import statistics
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from geval_audit import datasets
from geval_audit.tables import markdown_table
from geval_client import RewardClient, make_item
from geval_server.launcher import running_server

RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "bench_load.md"
TOLERANCE = 1e-3  # reward units; batched and solo runs differ only by float32 batch numerics
TIME_LIMIT_S = 1800  # no new calls after this; items never sent are counted apart from lost ones


def load_items(n: int) -> list:
    records = datasets.summeval()
    items = []
    for i in range(n):
        record = records[i % len(records)]
        # Short inputs keep thousands of items within minutes on a 2-core CPU; every
        # 10th item is empty and must come back as an explicit error, not go missing.
        completion = "" if i % 10 == 9 else record.text
        items.append(make_item(record.source[:400], completion, item_id=f"item-{i}"))
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--solo", type=int, default=200, help="items re-scored one at a time for comparison")
    parser.add_argument("--server")
    args = parser.parse_args()
    items = load_items(args.items)
    batches = [items[i:i + args.batch] for i in range(0, len(items), args.batch)]
    received: list = []
    sent: list = []
    lock = threading.Lock()
    started = time.monotonic()

    with contextlib.ExitStack() as stack:
        address = args.server or stack.enter_context(running_server())

        def client_loop(worker: int) -> None:
            with RewardClient(address, timeout=600) as client:
                for batch in batches[worker::args.clients]:
                    if time.monotonic() - started > TIME_LIMIT_S:
                        return
                    with lock:
                        sent.extend(batch)
                    results = client.score(batch, rubrics=["summeval-coherence"])
                    with lock:
                        received.extend(results)

        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(client_loop, range(args.clients)))
        load_seconds = time.monotonic() - started

        counts = Counter(r.id for r in received)
        sent_ids = {item.id for item in sent}
        lost = sent_ids - set(counts)
        duplicated = [i for i, c in counts.items() if c > 1]
        errors = [r for r in received if not r.ok]
        expected_errors = sum(1 for item in sent if not item.completion)
        by_id = {r.id: r for r in received}

        scorable = [item for item in sent if item.completion]
        sample = random.Random(0).sample(scorable, min(args.solo, len(scorable)))
        diffs = []
        with RewardClient(address, timeout=600) as client:
            for item in sample:
                solo = client.score([item], rubrics=["summeval-coherence"])[0]
                diffs.append(abs(solo.reward - by_id[item.id].reward))

    rows = [
        ("clients", args.clients), ("items", len(items)), ("items sent before the time limit", len(sent)),
        ("items per call", args.batch),
        ("results received", len(received)), ("lost", len(lost)), ("duplicated", len(duplicated)),
        ("explicit errors (empty completions sent)", f"{len(errors)} ({expected_errors})"),
        ("load phase seconds", f"{load_seconds:.1f}"), ("items/s under load", f"{len(received) / load_seconds:.1f}"),
        ("solo re-scored items", len(diffs)),
        ("max |reward batched - solo|", f"{max(diffs):.2e}"),
        ("mean |reward batched - solo|", f"{statistics.mean(diffs):.2e}"),
        (f"within tolerance {TOLERANCE}", sum(d <= TOLERANCE for d in diffs)),
    ]
    table = markdown_table(["measure", "value"], rows)
    print(table)
    command = "python benchmarks/bench_load.py"
    RESULTS.write_text(f"# Load test\n\n`{command}` on the embedded judge, loopback.\n\n{table}\n")
    ok = not lost and not duplicated and len(errors) == expected_errors and max(diffs) <= TOLERANCE
    print("PASS" if ok else "FAIL")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
