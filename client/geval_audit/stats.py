"""Statistics for the audits: percentile-bootstrap intervals and the G-Eval
correlation protocol. Pure numpy/scipy, no engine.

The G-Eval protocol (Liu et al. 2023, after SummEval's summary level): for each
prompt, Spearman and Kendall between metric and human scores across that
prompt's completions, skipping groups where either side is constant (a rank
correlation is undefined there), then the mean over prompts. The interval
resamples prompts, so it reflects how much the mean depends on which prompts
were rated.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

RESAMPLES = 2000
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its bootstrap interval, over n units."""

    value: float
    low: float
    high: float
    n: int

    def excludes(self, threshold: float) -> str | None:
        """'above' or 'below' when the whole interval is on one side of threshold."""
        if self.low > threshold:
            return "above"
        if self.high < threshold:
            return "below"
        return None

    def text(self, digits: int = 3) -> str:
        if math.isnan(self.value):
            return "n/a"
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


@dataclass(frozen=True)
class Correlation:
    spearman: Estimate
    kendall: Estimate
    groups_used: int = 0  # per-prompt protocol only
    groups_skipped: int = 0
    groups_of_two: int = 0  # used groups of two texts, whose correlation can only be +1 or -1


@dataclass(frozen=True)
class Regression:
    """Least squares y = intercept + slope * x, each with its bootstrap interval."""

    intercept: Estimate
    slope: Estimate


def _interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return math.nan, math.nan
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def _cluster_ids(n: int, clusters: Sequence[Hashable] | None) -> np.ndarray:
    if clusters is None:
        return np.arange(n)
    if len(clusters) != n:
        raise ValueError(f"got {n} values but {len(clusters)} cluster labels")
    index: dict[Hashable, int] = {}
    return np.array([index.setdefault(c, len(index)) for c in clusters], dtype=int)


def bootstrap_mean(
    values: Sequence[float],
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    clusters: Sequence[Hashable] | None = None,
) -> Estimate:
    """Mean with a percentile-bootstrap interval. With clusters (say, each value's
    prompt) whole clusters are resampled: values that share a prompt, such as one
    pair judged by several raters, are not independent evidence."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    ids = _cluster_ids(data.size, clusters)
    sums, counts = np.bincount(ids, weights=data), np.bincount(ids)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, sums.size, size=(resamples, sums.size))
    low, high = _interval(sums[picks].sum(axis=1) / counts[picks].sum(axis=1), confidence)
    return Estimate(float(data.mean()), low, high, int(data.size))


def is_constant(values: Sequence[float]) -> bool:
    return len(set(values)) < 2


def _rank_correlations(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    return float(stats.spearmanr(x, y).statistic), float(stats.kendalltau(x, y).statistic)


def grouped_correlation(
    metric: Sequence[float],
    human: Sequence[float],
    groups: Sequence[Hashable],
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Correlation:
    """The per-prompt protocol: metric[i] and human[i] belong to prompt groups[i].
    Groups with fewer than 2 texts or a constant side are skipped."""
    if not len(metric) == len(human) == len(groups):
        raise ValueError(f"got {len(metric)} metric, {len(human)} human values and {len(groups)} group labels")
    by_group: dict[Hashable, tuple[list[float], list[float]]] = {}
    for group, x, y in zip(groups, metric, human):
        xs, ys = by_group.setdefault(group, ([], []))
        xs.append(x)
        ys.append(y)
    per_group: list[tuple[float, float]] = []
    skipped = pairs = 0
    for xs, ys in by_group.values():
        if len(xs) < 2 or is_constant(xs) or is_constant(ys):
            skipped += 1
            continue
        per_group.append(_rank_correlations(xs, ys))
        pairs += len(xs) == 2
    spearman = bootstrap_mean([s for s, _ in per_group], resamples, confidence, seed)
    kendall = bootstrap_mean([k for _, k in per_group], resamples, confidence, seed)
    return Correlation(spearman, kendall, groups_used=len(per_group), groups_skipped=skipped, groups_of_two=pairs)


def group_spearmans(
    metric: Sequence[float], human: Sequence[float], groups: Sequence[Hashable]
) -> dict[Hashable, float]:
    """Each group's Spearman (NaN metric values left out), for groups grouped_correlation
    would use: 2+ texts, neither side constant."""
    by_group: dict[Hashable, tuple[list[float], list[float]]] = {}
    for group, x, y in zip(groups, metric, human):
        if not math.isnan(x):
            xs, ys = by_group.setdefault(group, ([], []))
            xs.append(x)
            ys.append(y)
    return {group: _rank_correlations(xs, ys)[0] for group, (xs, ys) in by_group.items()
            if len(xs) >= 2 and not is_constant(xs) and not is_constant(ys)}


def dataset_correlation(
    metric: Sequence[float],
    human: Sequence[float],
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    clusters: Sequence[Hashable] | None = None,
) -> Correlation:
    """One Spearman and Kendall over all pairs (turn/sample level); the interval
    resamples pairs, or whole clusters when given. NaN when fewer than 3 pairs or
    a side is constant."""
    x, y = np.asarray(metric, dtype=float), np.asarray(human, dtype=float)
    if x.size < 3 or is_constant(x.tolist()) or is_constant(y.tolist()):
        missing = Estimate(math.nan, math.nan, math.nan, int(x.size))
        return Correlation(missing, missing)
    spearman, kendall = _rank_correlations(x, y)
    ids = _cluster_ids(x.size, clusters)
    members = np.split(np.argsort(ids, kind="stable"), np.cumsum(np.bincount(ids))[:-1])
    rng = np.random.default_rng(seed)
    boot = np.full((resamples, 2), math.nan)
    for i in range(resamples):
        pick = np.concatenate([members[c] for c in rng.integers(0, len(members), size=len(members))])
        if not (is_constant(x[pick].tolist()) or is_constant(y[pick].tolist())):
            boot[i] = _rank_correlations(x[pick], y[pick])
    return Correlation(
        Estimate(spearman, *_interval(boot[:, 0], confidence), int(x.size)),
        Estimate(kendall, *_interval(boot[:, 1], confidence), int(x.size)),
    )


def bootstrap_regression(
    x: Sequence[float],
    y: Sequence[float],
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    clusters: Sequence[Hashable] | None = None,
) -> Regression:
    """Least squares of y on x; intervals resample whole clusters when given. NaN where x
    is constant (the slope, and the intercept away from that x, are undefined)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.size < 3 or is_constant(xs.tolist()):
        missing = Estimate(math.nan, math.nan, math.nan, int(xs.size))
        return Regression(missing, missing)

    def fit(chosen: np.ndarray) -> tuple[float, float]:
        if is_constant(xs[chosen].tolist()):
            return math.nan, math.nan
        slope, intercept = np.polyfit(xs[chosen], ys[chosen], 1)
        return float(intercept), float(slope)

    ids = _cluster_ids(xs.size, clusters)
    members = np.split(np.argsort(ids, kind="stable"), np.cumsum(np.bincount(ids))[:-1])
    rng = np.random.default_rng(seed)
    boot = np.array([
        fit(np.concatenate([members[c] for c in rng.integers(0, len(members), size=len(members))]))
        for _ in range(resamples)
    ])
    intercept, slope = fit(np.arange(xs.size))
    return Regression(
        Estimate(intercept, *_interval(boot[:, 0], confidence), int(xs.size)),
        Estimate(slope, *_interval(boot[:, 1], confidence), int(xs.size)),
    )
