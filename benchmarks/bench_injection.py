"""Hostile completions: the red-team run (geval_audit/redteam.py) on a fixed SummEval sample,
and how many clean texts of the evaluation sets the server's score-claim removal touches.

    python benchmarks/bench_injection.py [--docs 4] [--first-doc 0] [--rubric summeval-coherence]
        [--corpus FILE ...] [--server HOST:PORT] [--keep-score-claims] [--out FILE]
        [--sampling-n N | --reasoning-tokens N]

Base texts are SummEval summaries, one per document (the one with the median
expert score on the rubric's dimension). Without --server it starts the
embedded judge. The false-alarm count needs no judge: every SummEval summary,
Topical-Chat response, QAGS summary and human/LLM summary goes through the
server's removal (score claims and lines addressed to the grader) with every criterion
the server serves.
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import statistics
import sys
import time

from geval_audit import datasets
from geval_audit.cli import mode_from_args
from geval_audit.injections import CORPUS, load_corpus
from geval_audit.redteam import report_tables, run_redteam, summeval_base_texts
from geval_client import RewardClient
from geval_server.defences.chain import DefenceSettings, defences_for
from geval_server.launcher import running_server
from geval_server.scorers.geval.rubrics import load_rubrics

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def clean_texts() -> dict[str, list[str]]:
    """Every distinct clean text of the evaluation sets, by set."""
    pairs = datasets.human_vs_llm_pairs()
    summary_fields = [key for key in pairs[0] if key.endswith("summary")]
    return {
        "SummEval summaries": [r.text for r in datasets.summeval()],
        "Topical-Chat responses": [r.text for r in datasets.topical_chat()],
        "QAGS CNN/DM summaries": [r.text for r in datasets.qags("cnndm")],
        "QAGS XSum summaries": [r.text for r in datasets.qags("xsum")],
        "human/LLM summaries": list(dict.fromkeys(p[f] for p in pairs for f in summary_fields)),
    }


def false_alarms() -> list[str]:
    """Report lines: per set, the clean texts in which anything was removed."""
    criteria = sorted({rubric.criterion for rubric in load_rubrics().values()})
    remover = defences_for(frozenset(criteria), DefenceSettings())
    lines, total, touched = [], 0, 0
    started = time.monotonic()
    for name, texts in clean_texts().items():
        hits = [t for t in texts if remover.removed(t)[1]]
        lines.append(f"- {name}: {len(hits)} of {len(texts)}")
        lines += [f"  - `...{_around_removal(remover.removed(t)[0])}...`" for t in hits]
        total, touched = total + len(texts), touched + len(hits)
    per_text_ms = 1000 * (time.monotonic() - started) / total / 2
    return [f"Clean texts with anything removed (criteria {', '.join(criteria)}): **{touched} of {total} "
            f"({touched / total:.2%})**; removal takes {per_text_ms:.2f} ms per text.", "", *lines]


def _around_removal(text: str, width: int = 80) -> str:
    at = text.index("[")  # the first marker: `[score removed]` or `[removed]`
    return text[max(0, at - width):at + width].replace("\n", " ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=4, help="SummEval documents, one base summary each")
    parser.add_argument("--first-doc", type=int, default=0, help="index of the first SummEval document used")
    parser.add_argument("--rubric", default="summeval-coherence")
    parser.add_argument("--corpus", type=pathlib.Path, action="append",
                        help=f"injection file (repeatable; default {CORPUS.name})")
    parser.add_argument("--server", help="address of a running server (default: start the embedded judge)")
    parser.add_argument("--sampling-n", type=int, help="score by sampling n answers instead of log-probabilities")
    parser.add_argument("--reasoning-tokens", type=int,
                        help="score in reasoning mode: the judge evaluates first, within this many tokens")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS / "injections.md")
    parser.add_argument("--max-shift", type=float, default=0.15, help="mark the kinds whose max shift is over this")
    parser.add_argument("--keep-score-claims", action="store_true",
                        help="start the server with --keep-score-claims: the judge reads completions as written")
    args = parser.parse_args()

    corpora = {path: load_corpus(path) for path in args.corpus or [CORPUS]}
    bases = summeval_base_texts(args.docs, args.rubric, args.first_doc)
    results, seconds = {}, {}
    with contextlib.ExitStack() as stack:
        address = args.server or stack.enter_context(
            running_server(*(["--keep-score-claims"] if args.keep_score_claims else [])))
        client = stack.enter_context(RewardClient(address, timeout=3600))
        for path, corpus in corpora.items():
            started = time.monotonic()
            results[path] = run_redteam(client, bases, corpus, args.rubric, mode_from_args(args))
            seconds[path] = time.monotonic() - started
    first = next(iter(results.values()))
    report = [
        "# Injection benchmark results",
        "",
        f"Command: `{' '.join(['python benchmarks/bench_injection.py', *sys.argv[1:]])}`",
        f"Judge: {first.judge}; rubric `{args.rubric}`; {len(bases)} SummEval summaries; "
        f"{time.strftime('%Y-%m-%d')}; shared machine.",
        f"Clean reward: mean {statistics.mean(first.clean_rewards):.3f}, "
        f"range {min(first.clean_rewards):.3f}-{max(first.clean_rewards):.3f}.",
        "shift = reward(attacked) - reward(clean), reward in [0, 1]; `rose` = share of items whose reward "
        "went up; claims removed = attacked items in which the server removed a claim.",
    ]
    for path, result in results.items():
        items = len(bases) * (len(corpora[path]) + 1)
        kinds, per_attack = report_tables(result, args.max_shift)
        report += ["", f"## {path.name}: {len(corpora[path])} entries, {items} items in {seconds[path]:.0f} s "
                   f"({items / seconds[path]:.2f} items/s)", "", kinds, "", "### Per attack", "", per_attack]
        print(f"{path.name}\n{kinds}\n")
    report += ["", "## False alarms", "", *false_alarms()]
    args.out.write_text("\n".join(report) + "\n", encoding="utf-8")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
