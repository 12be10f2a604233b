"""The likelihood scorer's part of the meta-evaluation (bench_meta_eval.py --likelihood).

Variants, each served as a likelihood file written next to the -nosteps copies:
- generic: one instruction per task (the presets likelihood-summary, as first measured
  outside the product: "Summary of the article above:", and likelihood-response); one read serves
  every dimension;
- aspect: the `likelihood-*` presets, one instruction per dimension.
Each is served with the unconditional baseline (PMI), so one read gives three metrics:
the mean token log-probability (LikelihoodResult.mean_logprob: the scorer without a
baseline), the PMI (expected_score), and the mean log-probability with the copy and
repetition guards applied (the server's own guard functions on the same texts, limits
GUARD_LIMITS, as a spec with max_copy_rate / max_repetition_rate serves them).
With G-Eval's log-probability condition in the same run, "+ G-Eval" columns give the
equal-weight mean of the two rewards, as a Score call with both rubrics weighted 1 does.
"""

from __future__ import annotations

import math
import pathlib
import sys
import time

import common
from geval_client import RewardClient
from geval_server.scorers.geval.rubrics import PRESET_DIR, read_toml
from geval_server.scorers.likelihood.guards import copy_rate, guard_factor, repetition_rate

VARIANTS = ("generic", "aspect")
PMI_SUFFIX = "-pmi"
GUARD_LIMITS = {"max_copy_rate": 0.6, "max_repetition_rate": 0.1}  # chosen before any run, not tuned
GENERIC = {"summary": "likelihood-summary", "response": "likelihood-response"}  # task kind -> preset


def _kind(task_name: str) -> str:
    return "response" if task_name.startswith("Topical-Chat") else "summary"


def scorer_names(task_name: str, rubrics: dict[str, str], variant: str) -> dict[str, str]:
    """dimension -> the served likelihood scorer (PMI copy) for this variant."""
    if variant == "generic":
        return {dim: GENERIC[_kind(task_name)] + PMI_SUFFIX for dim in rubrics}
    if task_name.startswith("QAGS"):
        return {dim: "likelihood-qags-consistency" + PMI_SUFFIX for dim in rubrics}
    return {dim: f"likelihood-{preset}{PMI_SUFFIX}" for dim, preset in rubrics.items()}


def write_specs(folder: pathlib.Path) -> None:
    """PMI copies of the likelihood presets that read the completion after the source."""
    for path in sorted(PRESET_DIR.glob("likelihood-*.toml")):
        data = read_toml(path)
        if data.get("direction", "source") != "source":
            continue
        data.update(name=data["name"] + PMI_SUFFIX, baseline="unconditional")
        common.write_rubric_file(folder / f"{data['name']}.toml", data)


def guard(item: dict) -> float:
    return (guard_factor(copy_rate(item["completion"], item["prompt"]), GUARD_LIMITS["max_copy_rate"])
            * guard_factor(repetition_rate(item["completion"]), GUARD_LIMITS["max_repetition_rate"]))


def score_variant(client: RewardClient, task, variant: str, batch: int) -> tuple[dict, dict, dict]:
    """metric -> dimension -> one value per item (NaN where the item failed); the rewards
    per metric (for combinations); and run facts."""
    names = scorer_names(task.name, task.rubrics, variant)
    metrics = ("mean log p", "PMI", "guarded")
    scores = {f"likelihood {m} ({variant})": {d: [] for d in task.rubrics} for m in metrics}
    rewards = {f"likelihood {m} ({variant})": {d: [] for d in task.rubrics} for m in metrics}
    failures, tokens = 0, 0
    started = time.perf_counter()
    for start in range(0, len(task.items), batch):
        chunk = task.items[start : start + batch]
        results = client.score(chunk, rubrics=sorted(set(names.values())))
        for item, result in zip(chunk, results):
            by_name = {s.rubric: s for s in result.scores}
            failed = not result.ok
            failures += failed
            factor = guard(item)
            for dim, name in names.items():
                s = None if failed else by_name[name]
                values = {"mean log p": (s.mean_logprob, math.exp(s.mean_logprob)) if s else None,
                          "PMI": (s.score, s.reward) if s else None,
                          "guarded": (math.exp(s.mean_logprob) * factor,) * 2 if s else None}
                for metric, pair in values.items():
                    column = f"likelihood {metric} ({variant})"
                    scores[column][dim].append(pair[0] if pair else math.nan)
                    rewards[column][dim].append(pair[1] if pair else math.nan)
            tokens += sum(s.tokens_read for s in result.scores)
        print(f"  {task.name} [likelihood, {variant}] {min(start + batch, len(task.items))}/{len(task.items)} "
              f"items, {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
    facts = {"seconds": time.perf_counter() - started, "failed_items": failures,
             "judge_requests": len(task.items) * len(set(names.values())), "tokens_read": tokens,
             "mean_label_mass": math.nan}
    return scores, rewards, facts


def with_geval(rewards: dict, geval_scores: dict, scales: dict[str, tuple[float, float]]) -> dict:
    """Equal-weight mean of each likelihood reward and G-Eval's (E[s] mapped to [0, 1] on
    its rubric's scale, dimension -> (min, max))."""
    combined = {}
    for column, by_dim in rewards.items():
        combined[f"{column} + G-Eval"] = {
            dim: [(r + (g - scales[dim][0]) / (scales[dim][1] - scales[dim][0])) / 2
                  for r, g in zip(values, geval_scores[dim])]
            for dim, values in by_dim.items()
        }
    return combined


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    sys.exit("bench_likelihood_meta.py is the likelihood part of the meta-evaluation, not a benchmark of its own;\n"
             "run it with: python benchmarks/bench_meta_eval.py --likelihood generic,aspect")
