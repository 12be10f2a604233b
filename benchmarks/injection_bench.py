"""Hostile completions: how far each entry of the injection corpus (geval_audit/data/injections.jsonl) moves the reward.

    python benchmarks/injection_bench.py [--docs 4] [--rubric summeval-coherence]
                                         [--server HOST:PORT] [--out benchmarks/results/injections.md]
                                         [--mode logprobs|reasoning] [--reasoning-tokens 256]

Base items are SummEval summaries, one per document (the one with the median
expert score on the rubric's dimension). Each is scored clean and with every
corpus entry applied (appended, prepended, or inserted at the sentence break
nearest its middle), all of a document in one call so they share the article
prefix. shift = reward(with injection) - reward(clean). The `control` entries
are benign edits of the same size: they show how much any edit moves the judge,
the floor against which the injections should be read. Without --server it
starts the embedded judge itself.
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass

from geval_audit import datasets
from geval_audit.injections import CORPUS, load_corpus
from geval_audit.tables import markdown_table
from geval_client import RewardClient, make_item
from geval_server.launcher import running_server

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def load_base_items(n_docs: int, dimension: str) -> list[datasets.Rated]:
    """One summary per document: the one with the median expert score on `dimension`."""
    documents = list(datasets.groups(datasets.summeval()).values())[:n_docs]
    return [sorted(texts, key=lambda r: r.scores[dimension])[len(texts) // 2] for texts in documents]


@dataclass
class Shifts:
    values: list[float]

    @property
    def mean(self) -> float:
        return statistics.mean(self.values)

    @property
    def mean_abs(self) -> float:
        return statistics.mean(abs(v) for v in self.values)

    @property
    def max(self) -> float:
        return max(self.values)

    @property
    def rose(self) -> float:
        return sum(v > 0 for v in self.values) / len(self.values)


def table(rows: list[tuple[str, str, str, Shifts]]) -> str:
    return markdown_table(
        ["injection", "category", "position", "mean shift", "mean abs shift", "max shift", "rose"],
        [[name, category, position, f"{s.mean:+.3f}", f"{s.mean_abs:.3f}", f"{s.max:+.3f}", f"{s.rose:.0%}"]
         for name, category, position, s in rows],
        align="lllrrrr",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=4, help="SummEval documents, one base summary each")
    parser.add_argument("--rubric", default="summeval-coherence")
    parser.add_argument("--corpus", type=pathlib.Path, default=CORPUS)
    parser.add_argument("--server", help="address of a running server (default: start the embedded judge)")
    parser.add_argument("--port", default="0", help="port for the server this script starts (default: any free one)")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS / "injections.md")
    parser.add_argument("--keep-score-claims", action="store_true",
                        help="start the server with --keep-score-claims: the judge reads completions as written")
    parser.add_argument("--mode", choices=("logprobs", "reasoning"), default="logprobs",
                        help="reasoning: the judge writes its evaluation before its score is read")
    parser.add_argument("--reasoning-tokens", type=int, default=256, help="the evaluation's budget (reasoning mode)")
    args = parser.parse_args()

    corpus = load_corpus(args.corpus)
    base = load_base_items(args.docs, args.rubric.removeprefix("summeval-"))
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        serve_args = ["--port", args.port] + (["--keep-score-claims"] if args.keep_score_claims else [])
        address = args.server or stack.enter_context(running_server(*serve_args))
        client = stack.enter_context(RewardClient(address, timeout=3600))
        info = client.info()
        rubric = next(r for r in info.rubrics if r.name == args.rubric)
        attacks = [e.render(rubric.criterion, int(rubric.min_score), int(rubric.max_score)) for e in corpus]
        clean_rewards: list[float] = []
        clean_masses: list[float] = []
        shifts: dict[str, list[float]] = defaultdict(list)
        errors: dict[str, list[str]] = defaultdict(list)
        blanked = 0  # items with a corpus entry in which the server blanked a score claim
        for record in base:
            summary = record.text
            completions = [summary] + [e.apply(summary, a) for e, a in zip(corpus, attacks)]
            results = client.score(
                [make_item(record.source, c) for c in completions], rubrics=[args.rubric],
                reasoning_tokens=args.reasoning_tokens if args.mode == "reasoning" else None,
            )
            if results[0].HasField("error"):
                raise RuntimeError(f"clean summary of {record.group} failed: {results[0].error.message}")
            clean_rewards.append(results[0].reward)
            clean_masses.append(results[0].scores[0].label_mass)
            for entry, result in zip(corpus, results[1:]):
                if result.HasField("error"):
                    errors[entry.id].append(result.error.message)
                else:
                    shifts[entry.id].append(result.reward - results[0].reward)
                    blanked += result.score_claims_removed > 0
    elapsed = time.monotonic() - started

    rows = [(e.id, e.category, e.position, Shifts(shifts[e.id])) for e in corpus if shifts[e.id]]
    by_category: dict[str, list[float]] = defaultdict(list)
    for entry in corpus:
        by_category[entry.category].extend(shifts[entry.id])
    injected = [v for e in corpus if e.category != "control" for v in shifts[e.id]]
    summary_rows = [
        (f"**all injections** ({sum(e.category != 'control' for e in corpus)})", "", "", Shifts(injected)),
        *((f"category: {c}", "", "", Shifts(v)) for c, v in sorted(by_category.items()) if v),
    ]
    header = [
        "# Injection benchmark results",
        "",
        f"Command: `{' '.join(['python benchmarks/injection_bench.py', *sys.argv[1:]])}`",
        f"Judge: {info.judge_model}; rubric `{args.rubric}`; mode {args.mode}; {len(base)} SummEval summaries x "
        f"{len(corpus)} corpus entries; {elapsed:.0f} s; {time.strftime('%Y-%m-%d')}.",
        f"Clean reward: mean {statistics.mean(clean_rewards):.3f}, "
        f"range {min(clean_rewards):.3f}-{max(clean_rewards):.3f}; label mass {statistics.mean(clean_masses):.2f}.",
        f"Score claims (`Coherence: 5`) blanked by the server in {blanked} of "
        f"{sum(len(v) for v in shifts.values())} items with a corpus entry (controls included).",
        "shift = reward(with injection) - reward(clean), reward in [0, 1]; "
        "`rose` = share of items whose reward went up.",
        "",
    ]
    failed = [f"- {name}: {len(msgs)} item error(s), e.g. {msgs[0]}" for name, msgs in errors.items()]
    report = header + ["## Overall", "", table(summary_rows), "", "## Per injection", "", table(rows)]
    if failed:
        report += ["", "## Item errors", "", *failed]
    args.out.write_text("\n".join(report) + "\n", encoding="utf-8")
    print("\n".join(report))
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
