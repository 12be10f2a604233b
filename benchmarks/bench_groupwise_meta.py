"""Groupwise judging measured: does comparing a group's completions with each other rank
them like people do, next to the pointwise reads, and what does it cost?

    python benchmarks/bench_groupwise_meta.py [--summeval-docs 8] [--topical-chat-contexts 10] [--server HOST:PORT]

Quality: SummEval groups (the 16 system summaries of one article) and Topical-Chat groups
(the 6 responses to one context); per dimension, the within-group Spearman of each read's
rewards with the human scores, averaged over groups with a bootstrap interval over groups:
pointwise G-Eval, likelihood (the `likelihood-*` presets), and comparisons under each
schedule (all pairs, neighbours k=2, anchor = the human reference where the set has one,
listwise over the group's cyclic shifts), mean win probability and Bradley-Terry. From the
all-pairs and listwise reads: position consistency and the share of single-order reads that
preferred the first-placed response (listwise: the first letter most probable).
Cost: wall seconds per completion of ScoreGroups (all pairs) against the pointwise read of
the same groups of 4, 8 and 16 (each size on articles of its own, from the end of SummEval),
cold (first time) and warm (again), with the share of prompt tokens vLLM's prefix cache
served (its counters, read from the server's metrics port).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import urllib.request

import common
from geval_audit import datasets
from geval_audit.stats import grouped_correlation
from geval_client import RewardClient

SUMMEVAL = {d: f"summeval-{d}" for d in ("coherence", "consistency", "fluency", "relevance")}
TOPICAL_CHAT = {d: f"topical-chat-{d}" for d in ("coherence", "engagingness", "groundedness", "naturalness")}
COMPARISONS = {  # label -> ScoreGroups options; all pairs' mean win probability comes from its win matrix
    "compare all pairs, Bradley-Terry": {"schedule": "all_pairs", "aggregation": "bradley_terry"},
    "compare neighbours k=2": {"schedule": "neighbours", "neighbours": 2},
    "compare vs reference": {"schedule": "anchor"},
    "compare listwise, cyclic shifts": {"schedule": "listwise"},
}


def quality(client: RewardClient, task: str, groups: list[list[datasets.Rated]], rubrics: dict[str, str],
            rows: list, diagnostics: dict, report) -> None:
    has_reference = groups[0][0].reference is not None
    for dim, rubric in rubrics.items():
        human = [r.scores[dim] for g in groups for r in g]
        ids = [r.group for g in groups for r in g]
        reads: dict[str, list[float]] = {"pointwise G-Eval": [], "pointwise likelihood": []}
        for group in groups:
            items = [{"prompt": r.source, "completion": r.text} for r in group]
            pointwise = client.score(items, rubrics=[rubric, f"likelihood-{rubric}"])
            reads["pointwise G-Eval"] += [res.scores[0].reward for res in pointwise]
            reads["pointwise likelihood"] += [res.scores[1].reward for res in pointwise]
        for label, options in COMPARISONS.items():
            if options["schedule"] == "anchor" and not has_reference:
                continue
            wire = [{"prompt": g[0].source, "completions": [r.text for r in g],
                     **({"reference": g[0].reference} if has_reference else {})} for g in groups]
            results = client.score_groups(wire, rubrics=rubric, **options)
            reads[label] = [c.reward for res in results for c in res.completions]
            if label == "compare all pairs, Bradley-Terry":
                per = [res.rubrics[0] for res in results]
                reads["compare all pairs"] = [statistics.fmean(p for p in row if p is not None)
                                              for r in per for row in r.win_matrix]
            if label in ("compare all pairs, Bradley-Terry", "compare listwise, cyclic shifts"):
                per = [res.rubrics[0] for res in results]
                diagnostics.setdefault(task, []).append((dim, label.split(",")[0],
                                                         statistics.fmean(p.position_consistency for p in per),
                                                         statistics.fmean(p.first_position_preference for p in per),
                                                         statistics.fmean(p.label_mass for p in per)))
        for label, rewards in reads.items():
            corr = grouped_correlation(rewards, human, ids, resamples=1000, seed=0)
            rows.append([task, dim, label, corr.spearman.text()])
        print(f"  {task} {dim} done", flush=True)
        report()


COST_SIZES = (4, 8, 16)


def _cache_counts(metrics_url: str | None) -> tuple[float, float]:
    """vLLM's prefix-cache counters (prompt tokens looked up, tokens found cached), 0 without a metrics URL."""
    if metrics_url is None:
        return 0.0, 0.0
    time.sleep(1.0)  # the engine's stats of the last step reach the counters asynchronously
    text = urllib.request.urlopen(metrics_url, timeout=30).read().decode()
    totals = {"queries": 0.0, "hits": 0.0}
    for line in text.splitlines():
        for name in totals:
            if line.startswith(f"vllm:prefix_cache_{name}_total"):
                totals[name] += float(line.rsplit(" ", 1)[1])
    return totals["queries"], totals["hits"]


def cost(client: RewardClient, docs: list[list[datasets.Rated]], rows: list, metrics_url: str | None) -> None:
    """Per group size, on articles of its own, cold (texts new to the server) then warm (the same call again)."""
    reads = {"pointwise": lambda items, wire: client.score(items, rubrics="summeval-coherence"),
             "compare all pairs": lambda items, wire: client.score_groups(wire, rubrics="summeval-coherence",
                                                                          schedule="all_pairs")}
    per_size = len(docs) // len(COST_SIZES)
    for k, size in enumerate(COST_SIZES):
        groups = [g[:size] for g in docs[k * per_size:(k + 1) * per_size]]
        items = [{"prompt": r.source, "completion": r.text} for g in groups for r in g]
        wire = [{"prompt": g[0].source, "completions": [r.text for r in g]} for g in groups]
        measured = {}
        for label, read in reads.items():
            for state in ("cold", "warm"):
                queries, hits = _cache_counts(metrics_url)
                started = time.perf_counter()
                read(items, wire)
                seconds = (time.perf_counter() - started) / len(items)
                queries_after, hits_after = _cache_counts(metrics_url)
                cached = (hits_after - hits) / (queries_after - queries) if queries_after > queries else None
                measured[label, state] = seconds, cached
        for state in ("cold", "warm"):
            point_s, point_cached = measured["pointwise", state]
            pair_s, pair_cached = measured["compare all pairs", state]
            rows.append([size, state, f"{1000 * point_s:.0f}", f"{1000 * pair_s:.0f}", f"{pair_s / point_s:.1f}x",
                         2 * (size - 1), _share(point_cached), _share(pair_cached)])
        print(f"  cost, groups of {size} done", flush=True)


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--summeval-docs", type=int, default=8)
    parser.add_argument("--topical-chat-contexts", type=int, default=10)
    parser.add_argument("--cost-docs", type=int, default=2,
                        help="SummEval articles per group size, unseen by the quality part (0: no cost part)")
    parser.add_argument("--server", help="a running server (default: start one)")
    parser.add_argument("--metrics", help="that server's metrics URL (--metrics-port), for the prefix-cache shares")
    args = parser.parse_args()
    summeval = list(datasets.groups(datasets.summeval()).values())
    topical = list(datasets.groups(datasets.topical_chat()).values())
    info = common.machine()
    settings = {"summeval_docs": args.summeval_docs, "topical_chat_contexts": args.topical_chat_contexts,
                "judge": "embedded SmolLM2-135M-Instruct"}
    quality_rows, diagnostics, cost_rows = [], {}, []

    def report_quality() -> None:  # after every dimension, so a long run keeps what it measured
        notes = [f"{task} {dim}, {read}: position consistency {pc:.2f}, first-placed preferred in {first:.0%} of "
                 f"single-order reads, verdict mass {mass:.2f}"
                 for task, rows in diagnostics.items() for dim, read, pc, first, mass in rows]
        common.report("groupwise_quality", "Groupwise judging: within-group Spearman with human scores",
                      ["set", "dimension", "read", "Spearman [95% interval]"], quality_rows, settings, notes, info)

    with contextlib.ExitStack() as stack:
        metrics_url = args.metrics
        if not args.server:
            stack.enter_context(common.geval_server(50700, "--metrics-port", "50701", log_name="groupwise-server"))
            metrics_url = "http://127.0.0.1:50701/metrics"
        address = args.server or "127.0.0.1:50700"
        client = stack.enter_context(RewardClient(address, timeout=7200))
        if args.cost_docs:  # articles past the quality part's, so the cold figures are cold
            cost(client, summeval[-len(COST_SIZES) * args.cost_docs:], cost_rows, metrics_url)
            common.report("groupwise_cost", "Groupwise judging: cost per completion against the pointwise read",
                          ["group size", "cache", "pointwise ms/completion", "all pairs ms/completion", "ratio",
                           "reads per completion (all pairs)", "prompt tokens cached, pointwise",
                           "prompt tokens cached, all pairs"], cost_rows, {"cost_docs": args.cost_docs},
                          ["prompt tokens cached: the share of the call's prompt tokens vLLM's prefix cache "
                           "served (its prefix_cache_hits / prefix_cache_queries counters over the call)."], info)
        # Topical-Chat first: its groups of 6 cost a fraction of SummEval's 16.
        if args.topical_chat_contexts:
            quality(client, "Topical-Chat", topical[:args.topical_chat_contexts], TOPICAL_CHAT, quality_rows,
                    diagnostics, report_quality)
        if args.summeval_docs:
            quality(client, "SummEval", summeval[:args.summeval_docs], SUMMEVAL, quality_rows, diagnostics,
                    report_quality)


if __name__ == "__main__":
    main()
