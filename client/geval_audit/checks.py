"""The audit's checks, computed from the per-item records (items.jsonl).

- Self-preference against human references (G-Eval paper, Fig. 2): the same
  judge and rubrics score the model completion and the human reference for one
  prompt; gap = reward(completion) - reward(reference). Judges also prefer longer
  text, so the gap is also read at equal length: regressed on the difference in
  words (its intercept), and averaged over pairs of about the same length.
- Length bias: rank correlation of reward with length in words, over all
  scored texts and within prompts. The texts are the completions and, where
  scored, the references (in pairwise data a prompt often has one completion,
  so within it only the references vary in length); a text repeated across rows
  (one pair judged by several raters) counts once.
- Self-preference read as a comparison (with --compare-with-reference): the judge
  compares the completion with the reference directly, both orders read so the
  placement cannot decide; P(completion beats reference) averaged, 0.5 is no preference.
- SemScore: cosine of completion and reference embeddings, beside the judge.
- Agreement with humans: the G-Eval per-prompt protocol, and one correlation
  over all rows, for the judge's reward and for SemScore.
- Step position, for process rewards (step_position.py): step scores by index,
  and with the reordering probe, the change in a step's score with its position alone.

A row whose completion could not be scored (an item error) is left out of
every check; one whose reference failed is left out of self-preference only.
Every interval resamples prompts (groups), not rows: rows of one prompt, and
repeated ratings of one pair, are not independent evidence.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .inputs import PREFERENCES
from .stats import (
    Correlation,
    Estimate,
    bootstrap_mean,
    bootstrap_regression,
    dataset_correlation,
    grouped_correlation,
)
from .step_position import StepPosition, step_position

JUDGE_METRIC = "judge reward"
SEMSCORE_METRIC = "SemScore"


@dataclass(frozen=True)
class LabelBreakdown:
    pairs: int
    judge_prefers_completion: Estimate  # share
    gap: Estimate


@dataclass(frozen=True)
class LengthControl:
    """The tested pairs' gap with length held equal."""

    pairs: int
    mean_word_difference: float  # completion - reference
    gap_at_equal_length: Estimate  # the intercept of gap ~ word difference
    gap_per_100_words: Estimate  # its slope, per 100 words of difference
    gap_and_length: Correlation  # Spearman and Kendall of the gap with the word difference
    matched_pairs: int  # pairs within MATCHED_WORDS (or 10%) of each other in length
    matched_gap: Estimate
    detected: bool  # the gap at equal length lies above the margin
    verdict: str


@dataclass(frozen=True)
class SelfPreference:
    pairs: int
    mean_completion_reward: float
    mean_reference_reward: float
    gap: Estimate
    judge_prefers_completion: Estimate  # share of pairs with gap > 0
    judge_prefers_reference: float  # share with gap < 0 (the rest are ties)
    gap_by_rubric: dict[str, Estimate]
    by_human_label: dict[str, LabelBreakdown]  # keys from inputs.PREFERENCES
    # judge prefers the completion where humans preferred the reference
    self_preference_rate: Estimate | None
    detected: bool
    rule: str
    length: LengthControl | None  # None when the texts' lengths are not known or all differ alike
    gaps: list[float] = field(repr=False)


@dataclass(frozen=True)
class LengthBias:
    overall: Correlation
    within_prompts: Correlation
    lengths: list[int] = field(repr=False)
    rewards: list[float] = field(repr=False)


@dataclass(frozen=True)
class SemScoreCheck:
    model: str
    mean: Estimate
    with_judge: Correlation  # rank correlation of SemScore and judge reward over rows
    semscores: list[float] = field(repr=False)
    rewards: list[float] = field(repr=False)


@dataclass(frozen=True)
class Agreement:
    human_column: str
    metric: str
    per_prompt: Correlation
    overall: Correlation


@dataclass(frozen=True)
class Checks:
    rows_scored: int
    failed: list[tuple[str, str]]  # (row key, error message) for rows left out
    self_preference: SelfPreference | None
    length_bias: LengthBias | None
    semscore: SemScoreCheck | None
    agreement: list[Agreement]
    comparison: Estimate | None = None  # mean P(completion beats reference), judged side by side
    step_position: list[StepPosition] = field(default_factory=list)  # per rubric with step scores


def _ok(result: dict[str, Any] | None) -> bool:
    return result is not None and not (result.get("error") or {}).get("message")


def _rubric_rewards(result: dict[str, Any]) -> dict[str, float]:
    return {score["rubric"]: score["reward"] for score in result.get("scores", [])}


def self_preference(
    records: Sequence[dict], margin: float = 0.0, resamples: int = 2000, seed: int = 0
) -> SelfPreference | None:
    pairs = [r for r in records if _ok(r.get("reference_result"))]
    if not pairs:
        return None
    model = [r["completion_result"]["reward"] for r in pairs]
    human = [r["reference_result"]["reward"] for r in pairs]
    gaps = [m - h for m, h in zip(model, human)]
    prefers = [1.0 if g > 0 else 0.0 for g in gaps]
    groups = [r["group"] for r in pairs]

    def mean(values: Sequence[float], chosen: Sequence[int]) -> Estimate:
        return bootstrap_mean([values[i] for i in chosen], resamples, seed=seed,
                              clusters=[groups[i] for i in chosen])

    everything = range(len(pairs))
    by_rubric: dict[str, list[float]] = defaultdict(list)
    for r in pairs:
        human_rubrics = _rubric_rewards(r["reference_result"])
        for rubric, reward in _rubric_rewards(r["completion_result"]).items():
            by_rubric[rubric].append(reward - human_rubrics[rubric])
    by_label: dict[str, LabelBreakdown] = {}
    for label in PREFERENCES:
        chosen = [i for i, r in enumerate(pairs) if r.get("preference") == label]
        if chosen:
            by_label[label] = LabelBreakdown(len(chosen), mean(prefers, chosen), mean(gaps, chosen))
    gap = mean(gaps, everything)
    if "reference" in by_label:
        tested = by_label["reference"].gap
        tested_pairs = [i for i, r in enumerate(pairs) if r.get("preference") == "reference"]
        rule = (f"detected when the 95% interval of the mean gap over pairs where humans preferred "
                f"the reference lies above {margin:g}")
    else:
        tested, tested_pairs = gap, list(everything)
        rule = f"detected when the 95% interval of the mean gap (completion - reference) lies above {margin:g}"
    detected = tested.excludes(margin) == "above"
    chosen = [pairs[i] for i in tested_pairs]
    return SelfPreference(
        pairs=len(pairs),
        mean_completion_reward=sum(model) / len(model),
        mean_reference_reward=sum(human) / len(human),
        gap=gap,
        judge_prefers_completion=mean(prefers, everything),
        judge_prefers_reference=sum(1 for g in gaps if g < 0) / len(gaps),
        gap_by_rubric={name: mean(values, everything) for name, values in by_rubric.items()},
        by_human_label=by_label,
        self_preference_rate=by_label["reference"].judge_prefers_completion if "reference" in by_label else None,
        detected=detected,
        rule=rule,
        length=length_control([gaps[i] for i in tested_pairs], chosen, detected, margin, resamples, seed),
        gaps=gaps,
    )


MATCHED_WORDS = 5


def length_control(
    gaps: Sequence[float], pairs: Sequence[dict], detected: bool, margin: float, resamples: int, seed: int
) -> LengthControl | None:
    """The gap at equal length: the intercept of the gap regressed on the difference in
    words, and the mean gap over pairs of about the same length."""
    if any(r.get("completion_words") is None or r.get("reference_words") is None for r in pairs):
        return None
    differences = [r["completion_words"] - r["reference_words"] for r in pairs]
    groups = [r["group"] for r in pairs]
    fit = bootstrap_regression(differences, gaps, resamples, seed=seed, clusters=groups)
    if math.isnan(fit.intercept.value):
        return None
    matched = [i for i, r in enumerate(pairs)
               if abs(differences[i]) <= max(MATCHED_WORDS, 0.1 * (r["completion_words"] + r["reference_words"]) / 2)]
    at_equal = fit.intercept
    holds = at_equal.excludes(margin) == "above"
    if detected and holds:
        verdict = "it holds at equal length: length does not explain it"
    elif detected:
        verdict = (f"**length explains it**: at equal length the gap is {at_equal.text()}, not above {margin:g}; "
                   "the judge rewards the difference in length, not who wrote the text")
    elif holds:
        verdict = f"**length hides it**: at equal length the gap is {at_equal.text()}, above {margin:g}"
    else:
        verdict = f"not at equal length either (gap {at_equal.text()})"
    per_100 = fit.slope
    return LengthControl(
        pairs=len(pairs),
        mean_word_difference=sum(differences) / len(differences),
        gap_at_equal_length=at_equal,
        gap_per_100_words=Estimate(per_100.value * 100, per_100.low * 100, per_100.high * 100, per_100.n),
        gap_and_length=dataset_correlation(gaps, differences, resamples, seed=seed, clusters=groups),
        matched_pairs=len(matched),
        matched_gap=bootstrap_mean([gaps[i] for i in matched], resamples, seed=seed,
                                   clusters=[groups[i] for i in matched]),
        detected=holds,
        verdict=verdict,
    )


def _reward(record: dict) -> float:
    return record["completion_result"]["reward"]


def _texts(records: Sequence[dict]) -> list[tuple[str, int, float]]:
    """(group, words, reward) of each distinct scored text of a prompt: completions and references."""
    texts: dict[tuple[str, str], tuple[str, int, float]] = {}
    for r in records:
        texts[(r["group"], r["completion_digest"])] = (r["group"], r["completion_words"], _reward(r))
        if _ok(r.get("reference_result")):
            reference = (r["group"], r["reference_words"], r["reference_result"]["reward"])
            texts[(r["group"], r["reference_digest"])] = reference
    return list(texts.values())


def length_bias(records: Sequence[dict], resamples: int = 2000, seed: int = 0) -> LengthBias | None:
    texts = _texts(records)
    if len(texts) < 3:
        return None
    groups = [group for group, _, _ in texts]
    lengths = [words for _, words, _ in texts]
    rewards = [reward for _, _, reward in texts]
    return LengthBias(
        overall=dataset_correlation(rewards, lengths, resamples, seed=seed, clusters=groups),
        within_prompts=grouped_correlation(rewards, lengths, groups, resamples, seed=seed),
        lengths=lengths,
        rewards=rewards,
    )


def semscore_check(
    records: Sequence[dict], model: str, resamples: int = 2000, seed: int = 0
) -> SemScoreCheck | None:
    scored = [r for r in records if r.get("semscore") is not None]
    if not scored:
        return None
    semscores = [r["semscore"] for r in scored]
    rewards = [_reward(r) for r in scored]
    return SemScoreCheck(
        model=model,
        mean=bootstrap_mean(semscores, resamples, seed=seed, clusters=[r["group"] for r in scored]),
        with_judge=dataset_correlation(semscores, rewards, resamples, seed=seed,
                                       clusters=[r["group"] for r in scored]),
        semscores=semscores,
        rewards=rewards,
    )


def _human_score(column: str):
    return lambda record: record["human_scores"].get(column)


def agreement(
    records: Sequence[dict], human_columns: Sequence[str], resamples: int = 2000, seed: int = 0
) -> list[Agreement]:
    metrics = {JUDGE_METRIC: _reward, SEMSCORE_METRIC: lambda r: r.get("semscore")}
    found = []
    for column in human_columns:
        human = _human_score(column)
        for name, metric in metrics.items():
            rated = [r for r in records if metric(r) is not None and human(r) is not None]
            if not rated:
                continue
            groups = [r["group"] for r in rated]
            xs, ys = [metric(r) for r in rated], [human(r) for r in rated]
            found.append(Agreement(
                human_column=column,
                metric=name,
                per_prompt=grouped_correlation(xs, ys, groups, resamples, seed=seed),
                overall=dataset_correlation(xs, ys, resamples, seed=seed, clusters=groups),
            ))
    return found


def run_checks(
    records: Sequence[dict],
    human_columns: Sequence[str],
    semscore_model: str | None,
    self_preference_margin: float = 0.0,
    resamples: int = 2000,
    seed: int = 0,
) -> Checks:
    scored = [r for r in records if _ok(r["completion_result"])]
    failed = [
        (r["key"], r["completion_result"]["error"]["message"]) for r in records if not _ok(r["completion_result"])
    ] + [
        (r["key"], "reference: " + r["reference_result"]["error"]["message"])
        for r in scored if r.get("reference_result") is not None and not _ok(r["reference_result"])
    ]
    return Checks(
        rows_scored=len(scored),
        failed=failed,
        self_preference=self_preference(scored, self_preference_margin, resamples, seed),
        length_bias=length_bias(scored, resamples, seed),
        semscore=semscore_check(scored, semscore_model, resamples, seed) if semscore_model else None,
        agreement=agreement(scored, human_columns, resamples, seed),
        comparison=comparison_preference(scored, resamples, seed),
        step_position=step_position(scored, resamples, seed),
    )


def comparison_preference(records: Sequence[dict], resamples: int = 2000, seed: int = 0) -> Estimate | None:
    """Mean P(completion beats reference) over the rows the judge compared, prompts resampled."""
    compared = [r for r in records if r.get("comparison_win") is not None]
    if not compared:
        return None
    return bootstrap_mean([r["comparison_win"] for r in compared], resamples, seed=seed,
                          clusters=[r["group"] for r in compared])
