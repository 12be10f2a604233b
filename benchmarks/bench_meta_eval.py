"""Meta-evaluation: how well the judge's scores agree with human ratings on
SummEval (4 dimensions), Topical-Chat (4 dimensions) and QAGS (CNN/DM, XSum),
next to the figures published for G-Eval (../shared/data/README.md).

Conditions, each a column of the results table:
- probability-weighted: E[s] from the exact label probabilities (the server's reward);
- argmax: the most likely label of the same distribution (no extra judge calls);
- sampling: the mean of n sampled answers (default n=20, temperature 1, as the paper);
- reasoning: E[s] from the exact label probabilities read after the judge has written
  its own evaluation (greedy, at most --reasoning-tokens);
each with the rubric's evaluation steps and without them. "Without steps" serves
copies of the presets whose steps are one neutral line (see NO_STEPS_TEXT):
the prompt layout always has an `Evaluation Steps:` section, and a rubric
with no steps at all would get judge-written steps (auto chain-of-thought),
which is not the ablation.

Protocols (as G-Eval and UniEval): SummEval summary level (per document,
Spearman/Kendall over its summaries, constant groups skipped, mean over
documents); Topical-Chat turn level and QAGS sample level (one correlation
over all items).

Usage (starts the embedded judge itself unless --target is given):
    python benchmarks/bench_meta_eval.py --summeval-docs 3 --topical-contexts 5 --qags-docs 20
    python benchmarks/bench_meta_eval.py --tasks summeval --summeval-docs 10 --modes logprobs --steps with
    python benchmarks/bench_meta_eval.py --modes= --steps with --likelihood generic,aspect   # bench_likelihood_meta.py
    python benchmarks/bench_meta_eval.py --tasks summeval,topical-chat --summeval-docs 2 --topical-contexts 3 \
        --modes logprobs,sampling,reasoning --steps with
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import pathlib
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import bench_likelihood_meta as likelihood_meta
import common
from geval_audit import datasets
from geval_audit.stats import (
    Correlation,
    bootstrap_mean,
    dataset_correlation,
    group_spearmans,
    grouped_correlation,
)
from geval_audit.tables import markdown_table
from geval_client import Logprobs, Reasoning, RewardClient, Sampling
from geval_server.launcher import running_server
from geval_server.scorers.geval.rubrics import PRESET_DIR, read_toml

RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "bench_meta_eval"
NO_STEPS_SUFFIX = "-nosteps"
NO_STEPS_TEXT = "Assign the score."

# Published Spearman / Kendall (../shared/data/README.md); None where not given there.
PUBLISHED = {
    "SummEval (avg of 4)": {"G-Eval-4": (0.514, 0.418), "G-Eval-3.5": (0.401, 0.320),
                            "G-Eval-4 without probabilities": (0.502, None),
                            "G-Eval-4 without chain-of-thought": (0.500, None)},
    "Topical-Chat (avg of 4)": {"G-Eval-4": (0.588, None), "G-Eval-3.5": (0.585, None)},
    "QAGS CNN/DM": {"G-Eval-4": (0.685, None)},
    "QAGS XSum": {"G-Eval-4": (0.537, None)},
}


@dataclass
class Task:
    """One benchmark's items, scored with one rubric per dimension."""

    name: str
    rubrics: dict[str, str]  # dimension -> preset rubric
    items: list[dict] = field(default_factory=list)
    humans: list[dict[str, float]] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    per_group: bool = False  # summary level (SummEval) or one correlation over all items


def _task(name: str, rubrics: dict[str, str], records: list[datasets.Rated], per_group: bool = False) -> Task:
    task = Task(name, rubrics, per_group=per_group)
    for r in records:
        task.items.append({"prompt": r.source, "completion": r.text})
        task.humans.append({d: r.scores[d] for d in rubrics})
        task.groups.append(r.group)
    return task


TASKS = ("summeval", "topical-chat", "qags-cnndm", "qags-xsum")


def load_tasks(names: Sequence[str], summeval_docs: int | None, topical_contexts: int | None,
               qags_docs: int | None) -> list[Task]:
    make = {
        "summeval": lambda: _task("SummEval", {d: f"summeval-{d}" for d in datasets.SUMMEVAL_DIMENSIONS},
                                  datasets.first_groups(datasets.summeval(), summeval_docs), per_group=True),
        "topical-chat": lambda: _task("Topical-Chat",
                                      {d: f"topical-chat-{d}" for d in datasets.TOPICAL_CHAT_DIMENSIONS},
                                      datasets.first_groups(datasets.topical_chat(), topical_contexts)),
        "qags-cnndm": lambda: _task("QAGS CNN/DM", {"consistency": "summeval-consistency"},
                                    datasets.qags("cnndm")[:qags_docs]),
        "qags-xsum": lambda: _task("QAGS XSum", {"consistency": "summeval-consistency"},
                                   datasets.qags("xsum")[:qags_docs]),
    }
    return [make[name]() for name in names]


def write_no_steps_rubrics(names: set[str], folder: pathlib.Path) -> None:
    """Copies of the presets named NAME-nosteps, their steps one neutral line."""
    for name in sorted(names):
        data = read_toml(PRESET_DIR / f"{name}.toml")
        data["name"] = name + NO_STEPS_SUFFIX
        data["evaluation_steps"] = NO_STEPS_TEXT
        common.write_rubric_file(folder / f"{name}{NO_STEPS_SUFFIX}.toml", data)


@dataclass
class Condition:
    mode: str  # "logprobs", "sampling" or "reasoning"
    steps: bool

    @property
    def suffix(self) -> str:
        return "" if self.steps else NO_STEPS_SUFFIX

    @property
    def label(self) -> str:
        return f"{self.mode}, {'with' if self.steps else 'without'} steps"


def score_task(client: RewardClient, task: Task, condition: Condition, sampling_n: int,
               batch: int, reasoning_tokens: int = 128) -> tuple[dict[str, dict[str, list[float]]], dict]:
    """metric -> dimension -> one score per item (NaN where the item failed), and run facts
    (among them the mean label mass per dimension)."""
    rubric_of = {dim: preset + condition.suffix for dim, preset in task.rubrics.items()}
    metrics = ("probability-weighted", "argmax") if condition.mode == "logprobs" else (condition.mode,)
    scores = {m: {d: [] for d in task.rubrics} for m in metrics}
    failures, masses, rationale_words = 0, {d: [] for d in task.rubrics}, []
    started = time.perf_counter()
    for start in range(0, len(task.items), batch):
        results = client.score(
            task.items[start : start + batch], rubrics=list(rubric_of.values()),
            mode={"sampling": Sampling(sampling_n), "reasoning": Reasoning(reasoning_tokens)}.get(
                condition.mode, Logprobs()),
        )
        for result in results:
            by_rubric = {s.rubric: s for s in result.scores}
            failed = not result.ok
            failures += failed
            for dim, rubric in rubric_of.items():
                score = None if failed else by_rubric.get(rubric)
                masses[dim] += [score.label_mass] if score else []
                rationale_words += [len(score.rationale.split())] if score and condition.mode == "reasoning" else []
                if "probability-weighted" in scores:
                    scores["probability-weighted"][dim].append(score.expected_score if score else math.nan)
                    scores["argmax"][dim].append(float(score.top_label) if score else math.nan)
                else:
                    scores[condition.mode][dim].append(score.expected_score if score else math.nan)
        print(f"  {task.name} [{condition.label}] {min(start + batch, len(task.items))}/{len(task.items)} "
              f"items, {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    every_mass = [m for values in masses.values() for m in values]
    facts = {"seconds": time.perf_counter() - started, "failed_items": failures,
             "mean_label_mass": sum(every_mass) / len(every_mass) if every_mass else math.nan,
             "label_mass_by_dimension": {d: sum(v) / len(v) if v else math.nan for d, v in masses.items()},
             "judge_requests": len(task.items) * len(rubric_of)}
    if rationale_words:
        facts["mean_rationale_words"] = sum(rationale_words) / len(rationale_words)
    return scores, facts


def correlate(task: Task, dim: str, metric: list[float], resamples: int) -> Correlation:
    kept = [i for i, v in enumerate(metric) if not math.isnan(v)]
    values = [metric[i] for i in kept]
    human = [task.humans[i][dim] for i in kept]
    if task.per_group:
        return grouped_correlation(values, human, [task.groups[i] for i in kept], resamples)
    return dataset_correlation(values, human, resamples)


def _cell(c: Correlation) -> str:
    s, k = c.spearman, c.kendall
    if math.isnan(s.value):
        return "n/a"
    return f"{s.value:.3f} / {k.value:.3f}"


def _published_cell(benchmark: str) -> str:
    figures = PUBLISHED.get(benchmark, {})
    parts = [f"{who} {s:.3f}" + (f" / {k:.3f}" if k is not None else "") for who, (s, k) in figures.items()]
    return "; ".join(parts)


def results_markdown(results: dict) -> str:
    columns = results["columns"]
    rows = []
    for row in results["rows"]:
        shows_published = row["dimension"] == "average" or row["benchmark"].startswith("QAGS")
        rows.append([row["benchmark"], row["dimension"], row["items"], row.get("label_mass", ""),
                     *(row["cells"].get(c, "") for c in columns),
                     _published_cell(row["benchmark"]) if shows_published else ""])
    facts = [[f["benchmark"], f["condition"], round(f["seconds"]), f["judge_requests"], f["failed_items"],
              f"{f['mean_label_mass']:.3f}"] for f in results["facts"]]
    return "\n".join([
        "# Meta-evaluation results",
        "",
        f"Judge `{results['judge_model']}`; {results['subset']}. Cells: Spearman / Kendall "
        "(SummEval: summary level, mean over documents; Topical-Chat: turn level; QAGS: sample level). "
        "Label mass: the judge's probability on valid labels (log-probabilities, the first condition). "
        f"Sampling: n={results['sampling_n']} at temperature 1. \"without steps\": steps replaced by "
        f"\"{NO_STEPS_TEXT}\". n/a: undefined, the metric gave every item of a group (SummEval: of every "
        "document) the same score, as argmax does when one label dominates. "
        f"Run on {results['machine']}.",
        "",
        markdown_table(["benchmark", "dimension", "items", "label mass", *columns, "published (Spearman / Kendall)"],
                       rows),
        "",
        markdown_table(["benchmark", "condition", "seconds", "judge requests", "failed items", "mean label mass"],
                       facts),
        "",
        "Spearman with its 95% bootstrap interval (over documents for SummEval, whose average row "
        "averages each document's dimensions first; over items otherwise):",
        "",
        markdown_table(["benchmark", "dimension", "column", "Spearman [95% interval]"],
                       [[row["benchmark"], row["dimension"], column, text]
                        for row in results["rows"] for column, text in row.get("intervals", {}).items()]),
        *(part for table in results.get("split", []) for part in (
            "", "Average Spearman [95% interval over documents] on the documents where a configuration is "
            "chosen and on the documents held out from that choice:", "", markdown_table(table[0], table[1:]))),
    ]) + "\n"


def add_columns(rows: dict, columns: list, task: Task, scores: dict[str, dict[str, list[float]]],
                resamples: int) -> None:
    """One column per metric (column -> dimension -> values): a cell per dimension and,
    with several dimensions, their average."""
    for column, by_dim in scores.items():
        columns += [column] if column not in columns else []
        spearmans, kendalls = [], []
        for dim, values in by_dim.items():
            found = correlate(task, dim, values, resamples)
            row = rows.setdefault((task.name, dim), {"benchmark": task.name, "dimension": dim,
                                                     "items": len(task.items), "cells": {}})
            row["cells"][column] = _cell(found)
            row.setdefault("intervals", {})[column] = found.spearman.text()
            spearmans.append(found.spearman.value)
            kendalls.append(found.kendall.value)
        if len(by_dim) > 1:
            row = rows.setdefault((task.name, "average"), {
                "benchmark": f"{task.name} (avg of {len(by_dim)})", "dimension": "average",
                "items": len(task.items), "cells": {}})
            row["cells"][column] = (
                f"{sum(spearmans) / len(spearmans):.3f} / {sum(kendalls) / len(kendalls):.3f}"
                if all(map(math.isfinite, spearmans + kendalls)) else "n/a"
            )
            if task.per_group:
                row.setdefault("intervals", {})[column] = average_interval(task, by_dim, resamples).text()


def average_interval(task: Task, by_dim: dict[str, list[float]], resamples: int):
    """The dimension-averaged summary-level Spearman with a bootstrap interval over
    documents: each document's per-dimension correlations averaged, then the mean over
    documents resampled."""
    per_doc: dict[str, list[float]] = {}
    for dim, values in by_dim.items():
        for group, rho in group_spearmans(values, [h[dim] for h in task.humans], task.groups).items():
            per_doc.setdefault(group, []).append(rho)
    means = [sum(v) / len(v) for v in per_doc.values()]
    return bootstrap_mean(means, resamples=resamples)


def split_rows(task: Task, columns: dict[str, dict[str, list[float]]], tuning_docs: int,
               resamples: int) -> list[list[str]]:
    """The dimension-averaged summary-level Spearman of every column on the first
    `tuning_docs` documents (where a configuration is chosen) and on the rest (held out)."""
    documents = list(dict.fromkeys(task.groups))
    parts = {f"documents 1-{tuning_docs} (tuning)": set(documents[:tuning_docs]),
             f"documents {tuning_docs + 1}-{len(documents)} (held out)": set(documents[tuning_docs:])}
    rows = []
    for column, by_dim in columns.items():
        cells = []
        for kept in parts.values():
            index = [i for i, group in enumerate(task.groups) if group in kept]
            part = Task(task.name, task.rubrics, [task.items[i] for i in index], [task.humans[i] for i in index],
                        [task.groups[i] for i in index], per_group=True)
            cells.append(average_interval(part, {d: [v[i] for i in index] for d, v in by_dim.items()},
                                          resamples).text())
        rows.append([task.name, column, *cells])
    return [["benchmark", "column", *parts]] + rows


def run(args: argparse.Namespace, client: RewardClient, judge_model: str, scale_of: dict) -> dict:
    tasks = load_tasks(args.tasks, args.summeval_docs, args.topical_contexts, args.qags_docs)
    conditions = [Condition(mode, steps) for steps in args.steps for mode in args.modes]
    columns, rows, facts, raw, split = [], {}, [], {}, []
    for task in tasks:
        raw[task.name] = {"human": task.humans, "groups": task.groups}
        every_column: dict[str, dict[str, list[float]]] = {}
        for condition in conditions:
            scores, fact = score_task(client, task, condition, args.sampling_n, args.batch, args.reasoning_tokens)
            facts.append({"benchmark": task.name, "condition": condition.label, **fact})
            raw[task.name][condition.label] = scores
            for dim, mass in fact["label_mass_by_dimension"].items():
                if condition.mode == "logprobs":
                    rows.setdefault((task.name, dim), {"benchmark": task.name, "dimension": dim,
                                                       "items": len(task.items), "cells": {}})
                    rows[task.name, dim].setdefault("label_mass", f"{mass:.3f}")
            named = {f"{metric}, {'with' if condition.steps else 'without'} steps": by_dim
                     for metric, by_dim in scores.items()}
            every_column.update(named)
            add_columns(rows, columns, task, named, args.resamples)
        for variant in args.likelihood:
            scores, rewards, fact = likelihood_meta.score_variant(client, task, variant, args.batch)
            facts.append({"benchmark": task.name, "condition": f"likelihood ({variant})", **fact})
            geval = raw[task.name].get(Condition("logprobs", True).label, {}).get("probability-weighted")
            if geval is not None:
                scales = {dim: (scale_of[rubric].min_score, scale_of[rubric].max_score)
                          for dim, rubric in task.rubrics.items()}
                scores = {**scores, **likelihood_meta.with_geval(rewards, geval, scales)}
            raw[task.name][f"likelihood ({variant})"] = scores
            every_column.update(scores)
            add_columns(rows, columns, task, scores, args.resamples)
        if task.per_group and args.tuning_docs:
            split.append(split_rows(task, every_column, args.tuning_docs, args.resamples))
    subset = (f"SummEval first {args.summeval_docs or 100} documents, Topical-Chat first "
              f"{args.topical_contexts or 60} contexts, QAGS first {args.qags_docs or 'all'} items of each set")
    return {"judge_model": judge_model, "subset": subset, "sampling_n": args.sampling_n,
            "machine": args.machine, "columns": columns, "rows": list(rows.values()), "facts": facts,
            "split": split, "item_scores": raw}


def _names(known: Sequence[str]):
    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = sorted(set(names) - set(known))
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {list(known)}")
        return names
    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", help="a running server that serves the presets and the -nosteps copies")
    parser.add_argument("--serve-args", default="", help="extra `serve` arguments when starting the judge")
    parser.add_argument("--tasks", type=_names(TASKS), default=list(TASKS),
                        help=f"comma-separated, from {','.join(TASKS)} (default all)")
    parser.add_argument("--summeval-docs", type=int, help="first N SummEval documents (16 summaries each; all: 100)")
    parser.add_argument("--tuning-docs", type=int, metavar="N",
                        help="also report SummEval on its first N documents (to choose a configuration on) "
                             "and on the rest (held out), every column")
    parser.add_argument("--topical-contexts", type=int,
                        help="first N Topical-Chat contexts (6 responses each; all: 60)")
    parser.add_argument("--qags-docs", type=int, help="first N items of each QAGS set (all: 235 / 239)")
    parser.add_argument("--modes", type=lambda s: [m for m in s.split(",") if m], default=["logprobs", "sampling"],
                        help="G-Eval conditions: logprobs,sampling (default both; empty: none)")
    parser.add_argument("--likelihood", type=_names(likelihood_meta.VARIANTS), default=[],
                        help="likelihood scorer variants: generic,aspect (bench_likelihood_meta.py; default none)")
    parser.add_argument("--steps", type=lambda s: [v == "with" for v in s.split(",")], default=[True, False],
                        help="with,without (default both)")
    parser.add_argument("--sampling-n", type=int, default=20)
    parser.add_argument("--reasoning-tokens", type=int, default=128, help="the evaluation's budget (mode reasoning)")
    parser.add_argument("--batch", type=int, default=16, help="items per Score call")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--machine", default="this machine", help="described in the results, e.g. '2-core CPU'")
    parser.add_argument("--write-rubrics", type=pathlib.Path, metavar="DIR",
                        help="only write the -nosteps rubric copies to DIR (to serve them yourself)")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS,
                        help="results path without suffix: writes .json and .md (default %(default)s)")
    args = parser.parse_args()

    presets = {preset for task in load_tasks(TASKS, 1, 1, 1) for preset in task.rubrics.values()}
    if args.write_rubrics:
        args.write_rubrics.mkdir(parents=True, exist_ok=True)
        write_no_steps_rubrics(presets, args.write_rubrics)
        likelihood_meta.write_specs(args.write_rubrics)
        print(f"wrote {len(presets)} rubrics to {args.write_rubrics}; serve them with --rubrics {args.write_rubrics}")
        return
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        address = args.target
        if address is None:
            write_no_steps_rubrics(presets, pathlib.Path(folder))
            likelihood_meta.write_specs(pathlib.Path(folder))
            address = stack.enter_context(running_server("--rubrics", folder, *shlex.split(args.serve_args)))
        client = stack.enter_context(RewardClient(address, timeout=1800))
        info = client.info()
        missing = sorted({p + NO_STEPS_SUFFIX for p in presets} - {r.name for r in info.rubrics})
        if False in args.steps and missing:
            raise SystemExit(f"{address} does not serve {missing}: write them with --write-rubrics DIR "
                             "and start the server with --rubrics DIR, or pass --steps with")
        scale_of = {r.name: r for r in info.rubrics}
        results = run(args, client, info.judge_model, scale_of)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(results_markdown(results), encoding="utf-8")
    print(results_markdown(results))


if __name__ == "__main__":
    main()
