"""The step-position check: do a process reward's step scores fall with the step's index
whatever the step says?

Two readings, for every rubric whose scores carry step scores (`process-reward-model`,
`step-correctness`):

- Observational: the mean step score at each index, and the rank correlation of a step's
  score with its relative position (0 first, 1 last) within its completion, averaged over
  completions. In real solutions later steps may well be worse (errors compound), so a
  falling trend here is a question, not a verdict.
- Controlled (the reordering probe, `--step-order-probe N`): each completion of two or more
  steps is scored again with the same steps in other orders (reversed, then rotated), so
  every moved step is read at several positions with its text unchanged. A completion's
  effect is the within-step least-squares slope of score on position (each step's own mean
  removed, so content cancels), in score per step of position; the check reports the mean
  over completions and flags the rubric when the whole interval is below 0. Reordered math
  steps no longer follow from one another, so this measures the scorer on reordered text:
  how much its score moves with position alone, not how it grades a coherent solution.

The means' intervals (by index, and the probe's) resample prompts, as the audit's other checks
do; the correlation's, the per-completion protocol of stats.grouped_correlation, resamples
completions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .stats import Correlation, Estimate, bootstrap_mean, grouped_correlation

MAX_INDEX = 8  # the table's last row gathers steps from this index on


def probe_orders(steps: int, others: int) -> list[list[int]]:
    """The identity, then up to `others` distinct other orders of `steps` steps: the reversal
    first (it moves every step but a middle one the farthest), then rotations by 1, 2, ..."""
    identity = list(range(steps))
    candidates = [identity[::-1]] + [identity[shift:] + identity[:shift] for shift in range(1, steps)]
    orders = [identity]
    for order in candidates:
        if len(orders) > others:
            break
        if order not in orders:
            orders.append(order)
    return orders


def process_scores(result: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """A record's scores that carry step scores, by rubric."""
    if result is None:
        return {}
    return {score["rubric"]: score for score in result.get("scores", []) if score.get("step_scores") is not None}


def step_texts(completion: str, steps: list[str] | None, result: dict[str, Any]) -> list[str]:
    """The steps the probe reorders: the row's own, else the completion cut where the first
    process reward's spans say its steps are."""
    if steps is not None:
        return steps
    scores = process_scores(result)
    if not scores:
        return []
    spans = next(iter(scores.values()))["step_spans"]
    return [completion[start:end] for start, end in spans]


@dataclass(frozen=True)
class StepPosition:
    rubric: str
    completions: int  # completions with step scores
    by_index: list[tuple[str, Estimate]]  # ("1", ...), ..., (f"{MAX_INDEX}+", ...): mean step score
    trend: Correlation  # step score against relative position, within each completion, averaged
    probe: Estimate | None  # mean within-step change in score per step of position; None without the probe
    probe_orders: int  # orders read per probed completion, the identity included (the most any had)
    detected: bool  # the probe's whole interval lies below 0


def _by_index(rows: Sequence[tuple[str, list[float]]], resamples: int, seed: int) -> list[tuple[str, Estimate]]:
    at: dict[int, tuple[list[float], list[str]]] = defaultdict(lambda: ([], []))
    for group, scores in rows:
        for index, score in enumerate(scores):
            values, groups = at[min(index, MAX_INDEX - 1)]
            values.append(score)
            groups.append(group)
    return [(f"{index + 1}" if index < MAX_INDEX - 1 else f"{MAX_INDEX}+",
             bootstrap_mean(values, resamples, seed=seed, clusters=groups))
            for index, (values, groups) in sorted(at.items())]


def _trend(rows: Sequence[tuple[str, str, list[float]]], resamples: int, seed: int) -> Correlation:
    scores, positions, completions = [], [], []
    for key, _, step_scores in rows:
        last = len(step_scores) - 1
        if last < 1:
            continue
        scores += step_scores
        positions += [index / last for index in range(len(step_scores))]
        completions += [key] * len(step_scores)
    return grouped_correlation(scores, positions, completions, resamples, seed=seed)


def within_step_slope(orders: Sequence[Sequence[int]], scores: Sequence[Sequence[float] | None]) -> float | None:
    """One completion's change in score per step of position with each step's text held fixed:
    least squares of score on position with a mean per step. scores[o][i] is the score of the
    step orders[o][i], read at position i; an order the server failed is None. None when no
    step was read at two positions."""
    seen: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for order, read in zip(orders, scores):
        if read is None:
            continue
        for position, (step, score) in enumerate(zip(order, read)):
            seen[step].append((position, score))
    covariance = variance = 0.0
    for reads in seen.values():
        mean_position = sum(p for p, _ in reads) / len(reads)
        mean_score = sum(s for _, s in reads) / len(reads)
        covariance += sum((p - mean_position) * (s - mean_score) for p, s in reads)
        variance += sum((p - mean_position) ** 2 for p, _ in reads)
    return covariance / variance if variance > 0 else None


def _probe(records: Sequence[dict], rubric: str, resamples: int, seed: int) -> tuple[Estimate | None, int]:
    slopes, groups, most = [], [], 0
    for record in records:
        probe = record.get("step_orders")
        if not probe or rubric not in probe["scores"]:
            continue
        slope = within_step_slope(probe["orders"], probe["scores"][rubric])
        if slope is not None:
            slopes.append(slope)
            groups.append(record["group"])
            most = max(most, len(probe["orders"]))
    if not slopes:
        return None, 0
    return bootstrap_mean(slopes, resamples, seed=seed, clusters=groups), most


def step_position(records: Sequence[dict], resamples: int = 2000, seed: int = 0) -> list[StepPosition]:
    """The check for every rubric with step scores among the records (scored completions only)."""
    by_rubric: dict[str, list[tuple[str, str, list[float]]]] = defaultdict(list)
    for record in records:
        for rubric, score in process_scores(record["completion_result"]).items():
            by_rubric[rubric].append((record["key"], record["group"], list(score["step_scores"])))
    found = []
    for rubric, rows in by_rubric.items():
        probe, orders = _probe(records, rubric, resamples, seed)
        found.append(StepPosition(
            rubric=rubric,
            completions=len(rows),
            by_index=_by_index([(group, scores) for _, group, scores in rows], resamples, seed),
            trend=_trend(rows, resamples, seed),
            probe=probe,
            probe_orders=orders,
            detected=probe is not None and probe.excludes(0.0) == "below",
        ))
    return found
