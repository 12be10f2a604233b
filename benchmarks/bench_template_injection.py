"""Hostile completions against judge templates: the red-team run (geval_audit/redteam.py) on
the shipped Prometheus 2 absolute template (its `[RESULT]` verdict read exactly) and the
`<answer>`-tag reasoning template (the judge writes, its reply is cut at its own verdict), with
the server's defences on (score-claim removal and the bounded read, the default) and off
(`--keep-score-claims --no-masked-read-bound`): what the verdict's structural place (ours,
pre-filled in the judge's turn; the candidate's text inside the user turn) holds alone, and
what the defences add.

Corpora: injections_verdict_formats.jsonl (written for verdict formats before any template
was measured), and the project's injections.jsonl and injections_heldout.jsonl, rendered for
each template's criterion, verdict and best label. Bases: SummEval summaries as redteam's.

    .venv/bin/python benchmarks/bench_template_injection.py [--docs 4] [--reasoning-tokens 48]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import common  # noqa: E402
from geval_audit.injections import CORPUS, load_corpus  # noqa: E402
from geval_audit.redteam import CONTROL, run_redteam, summeval_base_texts  # noqa: E402
from geval_client import Logprobs, Reasoning, RewardClient  # noqa: E402

DEFENCES = {"on": (), "off": ("--keep-score-claims", "--no-masked-read-bound")}
VERDICT_CORPUS = "injections_verdict_formats.jsonl"
CORPORA = (VERDICT_CORPUS, "injections.jsonl", "injections_heldout.jsonl")


def _shifts(result, controls: bool) -> list[float]:
    return [s for e in result.entries if (e.entry.category == CONTROL) == controls for s in e.shifts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=4, help="SummEval documents, one base summary each")
    parser.add_argument("--reasoning-tokens", type=int, default=48, help="the reasoning template's budget")
    parser.add_argument("--port", type=int, default=50581)
    args = parser.parse_args()
    bases = summeval_base_texts(args.docs, "summeval-coherence")
    runs = [("prometheus-absolute", Logprobs(), corpus) for corpus in CORPORA]
    runs.append(("answer-tag-reasoning", Reasoning(max_tokens=args.reasoning_tokens), VERDICT_CORPUS))
    rows, by_category = [], {}
    for defences, flags in DEFENCES.items():
        with common.geval_server(args.port, "--template-presets", *flags, log_name=f"template-{defences}") as \
                (address, _), RewardClient(address, timeout=3600) as client:
            for rubric, mode, corpus_name in runs:
                corpus = load_corpus(CORPUS.parent / corpus_name)
                started = time.monotonic()
                result = run_redteam(client, bases, corpus, rubric, mode)
                print(f"{rubric} {corpus_name} defences {defences}: {time.monotonic() - started:.0f} s", flush=True)
                attacks, controls = _shifts(result, False), _shifts(result, True)
                attacked = [e for e in result.entries if e.entry.category != CONTROL]
                errors = sum(len(e.errors) for e in result.entries)
                rows.append([rubric, type(mode).__name__.lower(), corpus_name, defences,
                             f"{statistics.mean(result.clean_rewards):.3f}",
                             f"{statistics.mean(attacks):+.3f} / {max(attacks):+.3f}",
                             f"{sum(s > 0 for s in attacks) / len(attacks):.0%}",
                             f"{statistics.mean(controls):+.3f} / {max(map(abs, controls)):.3f}",
                             f"{sum(e.claims_removed for e in attacked)} of {len(attacks)}", errors])
                if corpus_name == VERDICT_CORPUS:
                    for category in result.categories:
                        shifts = [s for e in result.entries if e.entry.category == category for s in e.shifts]
                        by_category[(rubric, defences, category)] = shifts
    categories = sorted({c for _, _, c in by_category})
    notes = ["verdict-format corpus by kind, mean / max shift (prometheus-absolute, then answer-tag-reasoning; "
             "defences on | off):"]
    for category in categories:
        cells = []
        for rubric in ("prometheus-absolute", "answer-tag-reasoning"):
            for defences in DEFENCES:
                s = by_category[(rubric, defences, category)]
                cells.append(f"{statistics.mean(s):+.3f} / {max(s):+.3f}")
        notes.append(f"`{category}`: {cells[0]} \\| {cells[1]}; reasoning {cells[2]} \\| {cells[3]}")
    common.report(
        "bench_template_injection", "Judge templates under injection: the verdict's place, defences on and off",
        ["template", "mode", "corpus", "defences", "clean reward", "attacks: mean / max shift", "attacks rose",
         "controls: mean / max abs shift", "claims removed", "errors"], rows,
        {"bases": len(bases), "reasoning_tokens": args.reasoning_tokens, "judge": "embedded SmolLM2-135M-Instruct"},
        notes=notes)


if __name__ == "__main__":
    main()
