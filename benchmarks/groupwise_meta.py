"""Groupwise judging measured: does comparing a group's completions with each other rank
them like people do, next to the pointwise reads, and what does it cost?

    python benchmarks/groupwise_meta.py [--summeval-docs 8] [--topical-chat-contexts 10] [--server HOST:PORT]

Quality: SummEval groups (the 16 system summaries of one article) and Topical-Chat groups
(the 6 responses to one context); per dimension, the within-group Spearman of each read's
rewards with the human scores, averaged over groups with a bootstrap interval over groups:
pointwise G-Eval, likelihood (the `likelihood-*` presets), and comparisons under each
schedule (all pairs, neighbours k=2, anchor = the human reference where the set has one),
mean win probability and Bradley-Terry. From the all-pairs reads: position consistency and
the share of single-order reads that preferred the first-placed response.
Cost: wall and CPU seconds per completion of ScoreGroups (all pairs) against the pointwise
read of the same groups of 4 and 8, cold (first time) and warm (again: prefix cached).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

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
                diagnostics.setdefault(task, []).append((dim, statistics.fmean(p.position_consistency for p in per),
                                                         statistics.fmean(p.first_position_preference for p in per),
                                                         statistics.fmean(p.label_mass for p in per)))
        for label, rewards in reads.items():
            corr = grouped_correlation(rewards, human, ids, resamples=1000, seed=0)
            rows.append([task, dim, label, corr.spearman.text()])
        print(f"  {task} {dim} done", flush=True)
        report()


def cost(client: RewardClient, docs: list[list[datasets.Rated]], rows: list) -> None:
    for size in (4, 8):
        groups = [g[:size] for g in docs]
        items = [{"prompt": r.source, "completion": r.text} for g in groups for r in g]
        wire = [{"prompt": g[0].source, "completions": [r.text for r in g]} for g in groups]
        n = len(items)
        timings = {}
        for label in ("pointwise", "compare all pairs"):
            for state in ("cold", "warm"):
                started = time.perf_counter()
                if label == "pointwise":
                    client.score(items, rubrics="summeval-coherence")
                else:
                    client.score_groups(wire, rubrics="summeval-coherence", schedule="all_pairs")
                timings[(label, state)] = (time.perf_counter() - started) / n
        for state in ("cold", "warm"):
            rows.append([size, state, f"{1000 * timings[('pointwise', state)]:.0f}",
                         f"{1000 * timings[('compare all pairs', state)]:.0f}",
                         f"{timings[('compare all pairs', state)] / timings[('pointwise', state)]:.1f}x",
                         size - 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--summeval-docs", type=int, default=8)
    parser.add_argument("--topical-chat-contexts", type=int, default=10)
    parser.add_argument("--cost-docs", type=int, default=2,
                        help="SummEval articles, unseen by the quality part (0: no cost part)")
    parser.add_argument("--server", help="a running server (default: start one)")
    args = parser.parse_args()
    summeval = list(datasets.groups(datasets.summeval()).values())
    topical = list(datasets.groups(datasets.topical_chat()).values())
    info = common.machine()
    settings = {"summeval_docs": args.summeval_docs, "topical_chat_contexts": args.topical_chat_contexts,
                "judge": "embedded SmolLM2-135M-Instruct"}
    quality_rows, diagnostics, cost_rows = [], {}, []

    def report_quality() -> None:  # after every dimension, so a long run keeps what it measured
        notes = [f"{task} {dim}: position consistency {pc:.2f}, first-placed preferred in {first:.0%} of "
                 f"single-order reads, verdict mass {mass:.2f}"
                 for task, rows in diagnostics.items() for dim, pc, first, mass in rows]
        common.report("groupwise_quality", "Groupwise judging: within-group Spearman with human scores",
                      ["set", "dimension", "read", "Spearman [95% interval]"], quality_rows, settings, notes, info)

    with contextlib.ExitStack() as stack:
        address = args.server or stack.enter_context(common.geval_server(50700, log_name="groupwise-server"))[0]
        client = stack.enter_context(RewardClient(address, timeout=7200))
        if args.cost_docs:  # articles past the quality part's, so the cold figures are cold
            cost(client, summeval[-args.cost_docs:], cost_rows)
            common.report("groupwise_cost", "Groupwise judging: cost per completion against the pointwise read",
                          ["group size", "cache", "pointwise ms/completion", "all pairs ms/completion", "ratio",
                           "comparisons per completion"], cost_rows, {"cost_docs": args.cost_docs}, [], info)
        quality(client, "SummEval", summeval[:args.summeval_docs], SUMMEVAL, quality_rows, diagnostics,
                report_quality)
        quality(client, "Topical-Chat", topical[:args.topical_chat_contexts], TOPICAL_CHAT, quality_rows,
                diagnostics, report_quality)


if __name__ == "__main__":
    main()
