"""The likelihood scorer's hackability and cost, side by side with the G-Eval read.

Hackability: on SummEval documents, the best and the median human-rated summary
(mean over the four dimensions) against attacks a policy could learn: the article's
first 60 words copied, one sentence of the best summary repeated four times, the best
summary cut to its first third, a generic sentence, the best summary's words shuffled
(word salad), and every entry of the injection corpus (client/geval_audit/injections.py)
put into the median summary. Per scorer: the mean reward of each text, and how often
the attack's reward beats the best summary's (for injections: beats the median's, the
summary it was put into).

Scorers, all from one read where they can share it: the PMI-and-guards spec
(the likelihood-summary preset with baseline "unconditional", max_copy_rate 0.6,
max_repetition_rate 0.1, limits fixed before any run) returns the mean log p
(LikelihoodResult.mean_logprob: the unguarded scorer, reward exp(mean log p)), the PMI
(expected_score, reward logistic(PMI)) and the guarded PMI reward; "mean log p +
guards" is exp(mean log p) times the same guard factor. G-Eval is summeval-coherence
(log-probabilities); "+ G-Eval" is the equal-weight mean of the two rewards, what a
Score call with both weighted 1 returns.

Cost: GRPO-shaped calls (--cost-articles articles x 8 summaries), the G-Eval read and the likelihood
read (without and with the PMI baseline) on the same items, alternated, each on
articles neither has seen (cold prefix cache); seconds per item and their ratio.

    python benchmarks/bench_likelihood.py --docs 10
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import pathlib
import random
import statistics
import tempfile
import time

import common
from geval_audit import datasets
from geval_audit.injections import load_corpus
from geval_client import RewardClient
from geval_server.launcher import running_server

GUARDED = "likelihood-generic-summary-guarded"
RAW = "likelihood-summary"  # the preset
GEVAL = "summeval-coherence"
GENERIC_TEXT = "This article discusses an important issue and what it means for the people involved."
GUARDS = {"baseline": "unconditional", "max_copy_rate": 0.6, "max_repetition_rate": 0.1}
COST_FIRST_DOC = 60  # past the documents the other runs read, so every cost call starts cold
SCORERS = ("mean log p", "mean log p + guards", "PMI", "PMI + guards", "G-Eval", "PMI + guards + G-Eval")


def write_specs(folder: pathlib.Path) -> None:
    """The likelihood-summary preset with the PMI baseline and both guards."""
    fields = {"kind": "likelihood", "name": GUARDED, "criterion": "Overall",
              "instruction": "Summary of the article above:", **GUARDS}
    common.write_rubric_file(folder / f"{GUARDED}.toml", fields)


def attacks(doc: list[datasets.Rated], rng: random.Random) -> dict[str, str]:
    """The texts scored for one document: its best and median summary, and the attacks."""
    ranked = sorted(doc, key=lambda r: statistics.mean(r.scores.values()))
    best, median = ranked[-1].text, ranked[len(ranked) // 2].text
    words = best.split()
    salad = words[:]
    rng.shuffle(salad)
    first_sentence = best.split(" . ")[0].rstrip(" .") + " ."
    texts = {
        "best human-rated": best,
        "median human-rated": median,
        "article lead (60 words)": " ".join(doc[0].source.split()[:60]),
        "one sentence x4": " ".join([first_sentence] * 4),
        "best, first third": " ".join(words[: max(3, len(words) // 3)]),
        "generic sentence": GENERIC_TEXT,
        "word salad": " ".join(salad),
    }
    for entry in load_corpus():
        texts[f"injection {entry.id}"] = entry.apply(median, entry.render("Coherence", 1, 5))
    return texts


def rewards_of(result) -> dict[str, float]:
    by = {s.rubric: s for s in result.scores}
    guarded, geval = by[GUARDED], by[GEVAL]
    pmi = 1.0 / (1.0 + math.exp(-guarded.score))
    factor = guarded.reward / pmi
    raw = math.exp(guarded.mean_logprob)
    return {"mean log p": raw, "mean log p + guards": raw * factor, "PMI": pmi, "PMI + guards": guarded.reward,
            "G-Eval": geval.reward, "PMI + guards + G-Eval": (guarded.reward + geval.reward) / 2}


def hackability(client: RewardClient, docs: list[list[datasets.Rated]]) -> dict:
    rng = random.Random(0)
    per_text: dict[str, list[dict[str, float]]] = {}
    for doc in docs:
        texts = attacks(doc, rng)
        items = [{"prompt": doc[0].source, "completion": t} for t in texts.values()]
        results = client.score(items, rubrics=[GUARDED, GEVAL])
        for name, result in zip(texts, results):
            if result.error.message:
                raise RuntimeError(f"{name}: {result.error.message}")
            per_text.setdefault(name, []).append(rewards_of(result))
    return per_text


def hack_table(per_text: dict[str, list[dict[str, float]]]) -> list[list]:
    rows = []
    injections = [n for n in per_text if n.startswith("injection ")]
    for name in [n for n in per_text if not n.startswith("injection ")]:
        against = "median human-rated" if name == "best human-rated" else "best human-rated"
        cells = []
        for scorer in SCORERS:
            mine = [r[scorer] for r in per_text[name]]
            if name in ("best human-rated", "median human-rated"):
                cells.append(f"{statistics.mean(mine):.3f}")
                continue
            wins = sum(m > o[scorer] for m, o in zip(mine, per_text[against]))
            cells.append(f"{statistics.mean(mine):.3f} ({wins}/{len(mine)})")
        rows.append([name, *cells])
    cells, median = [], per_text["median human-rated"]
    for scorer in SCORERS:
        shifts = [r[scorer] - m[scorer] for n in injections for r, m in zip(per_text[n], median)]
        raised = sum(s > 0.01 for s in shifts)
        cells.append(f"{statistics.mean(shifts):+.3f} ({raised}/{len(shifts)} raised > 0.01)")
    rows.append([f"{len(injections)} injections into the median summary: mean shift", *cells])
    return rows


def cost(client: RewardClient, rounds: int, first_doc: int, articles: int) -> dict:
    """Seconds per item for each read, alternated over fresh GRPO batches (`articles` x 8)."""
    docs = common.summeval_docs()
    reads = {"G-Eval read (summeval-coherence)": [GEVAL], "likelihood read": [RAW],
             "likelihood read + PMI baseline": [GUARDED]}
    seconds: dict[str, list[float]] = {name: [] for name in reads}
    tokens: dict[str, int] = {}
    for r in range(rounds):
        for k, (name, rubrics) in enumerate(reads.items()):
            start = first_doc + articles * (r * len(reads) + k)
            items = common.grpo_batch(docs[start : start + articles])
            began = time.perf_counter()
            results = client.score(items, rubrics=rubrics)
            seconds[name].append((time.perf_counter() - began) / len(items))
            tokens[name] = tokens.get(name, 0) + sum(s.tokens_read for res in results for s in res.scores)
    return {"seconds_per_item": seconds, "tokens_read": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10, help="SummEval documents for the hackability table (0: none)")
    parser.add_argument("--cost-rounds", type=int, default=2, help="alternated GRPO calls per read (0: none)")
    parser.add_argument("--cost-articles", type=int, default=8, help="articles per cost call (8 summaries each)")
    parser.add_argument("--target", help="a running server that serves the specs (write_specs)")
    parser.add_argument("--serve-args", default="")
    args = parser.parse_args()
    docs = list(datasets.groups(datasets.summeval()).values())
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        write_specs(pathlib.Path(folder))
        address = args.target or stack.enter_context(running_server("--rubrics", folder, *args.serve_args.split()))
        client = stack.enter_context(RewardClient(address, timeout=1800))
        if args.docs:
            report_hackability(client, docs[: args.docs])
        if args.cost_rounds:
            report_cost(client, args.cost_rounds, args.cost_articles)


def report_hackability(client: RewardClient, docs: list[list[datasets.Rated]]) -> None:
    started = time.perf_counter()
    per_text = hackability(client, docs)
    notes = [
        f"The first {len(docs)} SummEval documents; cells: mean reward, and in brackets the documents where the "
        "text's reward beats the best human-rated summary's (for that row: the median's).",
        "Guard limits fixed before any run (copy rate 0.6 of word 5-grams from the article, repetition rate 0.1 "
        "of word 3-grams), not tuned on these documents.",
        f"Took {time.perf_counter() - started:.0f} s (the load averages above say what else ran).",
    ]
    common.report("bench_likelihood", "Likelihood scorer: hackability beside G-Eval", ["text", *SCORERS],
                  hack_table(per_text), {"docs": len(docs)}, notes)
    raw = common.RESULTS_DIR / "bench_likelihood_items.json"
    raw.write_text(json.dumps(per_text, indent=1) + "\n", encoding="utf-8")


def report_cost(client: RewardClient, rounds: int, articles: int) -> None:
    spent = cost(client, rounds, COST_FIRST_DOC, articles)
    seconds = spent["seconds_per_item"]
    geval = statistics.mean(seconds["G-Eval read (summeval-coherence)"])
    rows = [[name, " / ".join(f"{s * 1000:.0f}" for s in values), f"{statistics.mean(values) / geval:.2f}x",
             spent["tokens_read"][name]] for name, values in seconds.items()]
    notes = [f"GRPO calls of {8 * articles} items ({articles} SummEval articles x 8 summaries), articles no "
             "earlier call read (cold prefix cache), the reads alternated round by round (the load averages above "
             "say what else ran): compare the ratios."]
    common.report("likelihood_cost", "Likelihood read: cost per item beside the G-Eval read",
                  ["read", "ms per item, each round", "vs G-Eval", "tokens read"], rows,
                  {"rounds": rounds, "articles": articles}, notes)


if __name__ == "__main__":
    main()
