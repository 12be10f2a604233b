"""Per-batch signals that tell whether the judge's rewards can be trusted.

- label_mass: mean probability the judge put on valid score labels (low: it was
  not answering the question); low_confidence_share: share of (item, rubric)
  scores the server flagged.
- failed_share: completions that got no reward (None).
- score_claim_share: completions in which the server removed a score claim
  (`Coherence: 5`); rising, it shows the policy learning to write its own score.
- bound_lowered_share/<rubric>, bound_gap/<rubric> (and over all rubrics without the
  suffix): share of completions whose reward the bounded second read lowered, and the
  mean gap between the plain and bounded reads. The bound removes what addresses the
  judge's score slot (its criterion's name, numerals) and keeps the lower read; rising,
  they show a policy that has started to sway the judge, the step it begins.
- latency_s: wall time of the scoring call, retries included.
- step_score/<rubric>/<k> (process rewards): the mean score of step k (from 1, up to
  STEP_POSITIONS) over the completions that have one, and steps/<rubric>, their mean number of
  steps; scores that fall with k whatever the content show a process reward that grades a
  step's position, not the step.
- self_preference_share / self_preference_margin: share of completions scored
  above their human reference, and the mean reward margin over it (only when a
  reference column is scored). A judge that keeps preferring the policy's text
  to the human's may be rewarding its own style (the G-Eval paper saw this
  with LLM-written summaries).
- length_spearman: rank correlation between reward and completion length; a
  high value warns of verbosity bias. Only over MIN_RANK_ITEMS scored completions
  or more: on 2 or 3 it is +-1 or close to it whatever the judge does.

Per completion (TRL's completions table, through log_extra): label_mass (mean
over the rubrics), error (the server's message; a row's own rubric that failed is
named by its column and row), score_claims_removed, bound_gap, in reasoning mode
rationale (the judge's evaluation, per rubric where there are several), and with process
rewards step_scores (each step's score, per rubric where there are several).

Per sample (OpenRLHF's extra_logs, veRL's reward dict; the trainer averages them per
step): sample_logs, whose bound_lowered and bound_gap averages are the share and gap above.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...types import GEvalScore, ItemResult, ProcessRewardScore, RubricScore, bound_summaries, label_mass
from .row_rubrics import rubric_error
from .scoring import SampleReward
from .trl_batch import RewardBatch, rewards_of

# Under no correlation, |rho| exceeds 0.65 by chance in 5% of samples of 10 items
# (and reaches 1 on 2 items always): fewer items say nothing about verbosity bias.
MIN_RANK_ITEMS = 10
STEP_POSITIONS = 8  # step_score/<rubric>/<k> is logged for the first steps only: a few metrics, not hundreds


def batch_metrics(
    batch: RewardBatch, results: Sequence[ItemResult], latency_s: float
) -> dict[str, float]:
    """Only metrics with enough data appear: no NaN placeholders."""
    rewards = rewards_of(results, batch.completions)
    scored = [i for i, reward in enumerate(rewards) if reward is not None]
    metrics = {
        "latency_s": latency_s,
        "failed_share": 1 - len(scored) / batch.completions,
        "score_claim_share": float(np.mean([r.score_claims_removed > 0 for r in results[: batch.completions]])),
    }
    scores = [score for i in scored for score in results[i].scores if isinstance(score, GEvalScore)]
    if scores:
        metrics["label_mass"] = float(np.mean([s.label_mass for s in scores]))
        metrics["low_confidence_share"] = float(np.mean([s.low_confidence for s in scores]))
        metrics.update(bound_metrics([results[i] for i in scored]))
    metrics.update(step_metrics([results[i] for i in scored]))
    if len(scored) >= MIN_RANK_ITEMS:
        rho = spearman([rewards[i] for i in scored], [batch.lengths[i] for i in scored])
        if rho is not None:
            metrics["length_spearman"] = rho
    margins = [
        rewards[i] - results[ref].reward
        for i in scored
        if (ref := batch.reference_items[i]) is not None and results[ref].ok
    ]
    if margins:
        metrics["self_preference_share"] = float(np.mean([m > 0 for m in margins]))
        metrics["self_preference_margin"] = float(np.mean(margins))
    return metrics


def step_metrics(results: Sequence[ItemResult]) -> dict[str, float]:
    """Per process-reward rubric: the mean score at each of the first STEP_POSITIONS steps, and
    the mean number of steps."""
    by_rubric: dict[str, list[ProcessRewardScore]] = {}
    for result in results:
        for score in result.scores:
            if isinstance(score, ProcessRewardScore):
                by_rubric.setdefault(score.rubric, []).append(score)
    metrics = {}
    for rubric, scores in by_rubric.items():
        metrics[f"steps/{rubric}"] = float(np.mean([len(s.step_scores) for s in scores]))
        for k in range(min(STEP_POSITIONS, max(len(s.step_scores) for s in scores))):
            metrics[f"step_score/{rubric}/{k + 1}"] = float(np.mean([s.step_scores[k] for s in scores
                                                                     if len(s.step_scores) > k]))
    return metrics


def bound_metrics(results: Sequence[ItemResult]) -> dict[str, float]:
    """The bound's share lowered and mean gap, per G-Eval rubric and over the items' rewards."""
    metrics = {}
    for summary in bound_summaries(results):
        metrics[f"bound_lowered_share/{summary.rubric}"] = summary.lowered_share
        metrics[f"bound_gap/{summary.rubric}"] = summary.mean_gap
    gaps = [max(0.0, r.plain_reward - r.reward) for r in results if r.ok]
    if gaps:
        metrics["bound_lowered_share"] = float(np.mean([gap > 0 for gap in gaps]))
        metrics["bound_gap"] = float(np.mean(gaps))
    return metrics


SAMPLE_LOG_KEYS = ("label_mass", "failed", "score_claims_removed", "bound_lowered", "bound_gap")


def sample_logs(reward: SampleReward) -> dict[str, float]:
    """What a trainer logs per sample beside its reward (OpenRLHF's extra_logs, veRL's reward
    dict): SAMPLE_LOG_KEYS, the same for every sample."""
    values = (reward.label_mass, float(reward.failed), float(reward.score_claims_removed),
              float(reward.bound_gap > 0), reward.bound_gap)
    return dict(zip(SAMPLE_LOG_KEYS, values))


def sample_step_logs(reward: SampleReward) -> dict[str, float]:
    """One sample's process reward as metrics (verifiers' per-trace metrics): "steps", its number
    of steps; "step_score_min" and "step_score_mean"; "step_score/<k>", step k's score (from 1, up
    to STEP_POSITIONS). {} without one, or when not scored. A trainer that averages each metric
    over the samples that report it then shows TRL's step_score/<rubric>/<k>."""
    scores = reward.step_scores
    if reward.failed or not scores:
        return {}
    logs = {"steps": float(len(scores)), "step_score_min": min(scores), "step_score_mean": float(np.mean(scores))}
    logs.update({f"step_score/{k + 1}": score for k, score in enumerate(scores[:STEP_POSITIONS])})
    return logs


def completion_columns(batch: RewardBatch, results: Sequence[ItemResult]) -> dict[str, list]:
    """One value per completion for each column; None where it does not apply."""
    mine = results[: batch.completions]
    columns = {
        "label_mass": [label_mass(r) if r.ok else None for r in mine],
        "error": [
            None if r.ok else rubric_error(r.error, origin)
            for r, origin in zip(mine, batch.rubric_origins)
        ],
        "score_claims_removed": [r.score_claims_removed for r in mine],
        "bound_gap": [max(0.0, r.plain_reward - r.reward) if r.ok else None for r in mine],
    }
    if any(getattr(s, "rationale", "") for r in mine for s in r.scores):
        columns["rationale"] = [_rationale(r.scores) for r in mine]
    if any(isinstance(s, ProcessRewardScore) for r in mine for s in r.scores):
        columns["step_scores"] = [_step_scores(r.scores) if r.ok else None for r in mine]
    return columns


def _step_scores(scores: Sequence[RubricScore]) -> str:
    """Each step's score to 3 places; several process rewards, each under its rubric's name."""
    steps = [s for s in scores if isinstance(s, ProcessRewardScore)]
    written = [" ".join(f"{v:.3f}" for v in s.step_scores) for s in steps]
    if len(steps) == 1:
        return written[0]
    return " | ".join(f"[{s.rubric}] {text}" for s, text in zip(steps, written))


def _rationale(scores: Sequence[RubricScore]) -> str | None:
    """One rubric's evaluation as written; several, each under its rubric's name."""
    written = [s for s in scores if isinstance(s, GEvalScore) and s.rationale]
    if len(scores) == 1:
        return written[0].rationale if written else ""
    return "\n\n".join(f"[{s.rubric}] {s.rationale}" for s in written) or None


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (ties get their average rank); None under 2 points or when
    either side is constant, where the correlation is undefined."""
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} x values but {len(y)} y values")
    if len(x) < 2:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def average_ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks from 1, tied values sharing the mean of the ranks they span."""
    array = np.asarray(values, dtype=float)
    order = np.argsort(array, kind="stable")
    _, first, counts = np.unique(array[order], return_index=True, return_counts=True)
    ranks = np.empty(len(array))
    ranks[order] = np.repeat(first + (counts + 1) / 2, counts)
    return ranks
