"""The report's plots, rendered with matplotlib (Agg, no display) to PNG bytes."""

from __future__ import annotations

import io
from collections.abc import Sequence

from .checks import Agreement, LengthBias, SelfPreference, SemScoreCheck


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot, *pyplot.subplots(figsize=(6.0, 3.6), dpi=100)


def _png(pyplot, figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    pyplot.close(figure)
    return buffer.getvalue()


def gap_histogram(check: SelfPreference) -> bytes:
    pyplot, figure, axes = _figure()
    axes.hist(check.gaps, bins=30, color="#4c72b0")
    axes.axvline(0.0, color="black", linewidth=1)
    axes.axvline(check.gap.value, color="#c44e52", linestyle="--", label=f"mean {check.gap.value:+.3f}")
    axes.set_xlabel("reward(completion) - reward(reference)")
    axes.set_ylabel("pairs")
    axes.legend()
    return _png(pyplot, figure)


def preference_by_label(check: SelfPreference) -> bytes:
    pyplot, figure, axes = _figure()
    labels = list(check.by_human_label)
    shares = [check.by_human_label[k].judge_prefers_completion for k in labels]
    axes.bar(
        [f"humans prefer\n{k}" if k != "equal" else "humans: equal" for k in labels],
        [s.value for s in shares],
        yerr=[[s.value - s.low for s in shares], [s.high - s.value for s in shares]],
        color="#55a868", capsize=4,
    )
    axes.axhline(0.5, color="black", linewidth=1, linestyle=":")
    axes.set_ylim(0, 1)
    axes.set_ylabel("judge prefers the completion")
    return _png(pyplot, figure)


def _scatter(x: Sequence[float], y: Sequence[float], xlabel: str, ylabel: str) -> bytes:
    pyplot, figure, axes = _figure()
    axes.scatter(x, y, s=10, alpha=0.6, color="#4c72b0")
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    return _png(pyplot, figure)


def length_scatter(check: LengthBias) -> bytes:
    return _scatter(check.lengths, check.rewards, "length (words)", "judge reward")


def semscore_scatter(check: SemScoreCheck) -> bytes:
    return _scatter(check.semscores, check.rewards, f"SemScore ({check.model.split(' ')[0]})", "judge reward")


def agreement_bars(found: Sequence[Agreement]) -> bytes:
    pyplot, figure, axes = _figure()
    estimates = [a.per_prompt.spearman for a in found]
    axes.barh(
        [f"{a.metric} vs {a.human_column}" for a in found],
        [e.value for e in estimates],
        xerr=[[e.value - e.low for e in estimates], [e.high - e.value for e in estimates]],
        color="#8172b2", capsize=4,
    )
    axes.axvline(0.0, color="black", linewidth=1)
    axes.set_xlim(-1, 1)
    axes.set_xlabel("per-prompt Spearman (mean over prompts)")
    return _png(pyplot, figure)
