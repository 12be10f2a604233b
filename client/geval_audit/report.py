"""The audit report: the checks as sections of text, tables and plots, written
as Markdown (report.md) and as one self-contained HTML page (report.html, the
plots embedded as base64 PNG)."""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass, field

from . import plots
from .checks import MATCHED_WORDS, Checks, LengthControl, SelfPreference
from .inputs import RowError
from .stats import Correlation, Estimate
from .step_position import StepPosition
from .tables import markdown_table

MAX_LISTED = 20


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Figure:
    caption: str
    png: bytes


Block = str | Table | Figure


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass(frozen=True)
class RunContext:
    input: str
    rows_read: int
    row_errors: list[RowError]
    judge_model: str
    rubrics: dict[str, float]
    rubric_hashes: dict[str, str]
    rubrics_using_reference: list[str]
    mode: str
    semscore_model: str | None
    gate_failures: list[str]


def _corr_cells(c: Correlation) -> list[str]:
    return [c.spearman.text(), c.kendall.text()]


def _share(e: Estimate) -> str:
    return "n/a" if math.isnan(e.value) else f"{e.value:.1%} [{e.low:.1%}, {e.high:.1%}]"


def run_section(context: RunContext, checks: Checks) -> Section:
    section = Section("Run")
    rubrics = ", ".join(f"`{n}` (weight {w:g}, hash `{context.rubric_hashes.get(n, '?')[:12]}`)"
                        for n, w in context.rubrics.items())
    section.blocks.append(
        f"Input `{context.input}`: {context.rows_read} rows read, {len(context.row_errors)} bad, "
        f"{checks.rows_scored} scored, {len(checks.failed)} with a scoring error. "
        f"Judge `{context.judge_model}`, {context.mode}; rubrics {rubrics}. "
        f"SemScore model: {context.semscore_model or 'not used (no reference column, or --no-semscore)'}."
    )
    if context.gate_failures:
        section.blocks.append("**CI gate failed:** " + " ".join(context.gate_failures))
    problems = [str(e) for e in context.row_errors] + [f"{key}: {msg}" for key, msg in checks.failed]
    if problems:
        listed = problems[:MAX_LISTED]
        more = f" (and {len(problems) - MAX_LISTED} more)" if len(problems) > MAX_LISTED else ""
        section.blocks.append("Rows left out" + more + ":\n\n" + "\n".join(f"- {p}" for p in listed))
    return section


def self_preference_section(check: SelfPreference, context: RunContext) -> Section:
    section = Section("Self-preference against human references")
    verdict = "**DETECTED**" if check.detected else "not detected"
    section.blocks.append(
        f"{check.pairs} pairs: the same judge and rubrics scored the model completion and the human "
        f"reference for one prompt. Mean reward {check.mean_completion_reward:.3f} (completion) vs "
        f"{check.mean_reference_reward:.3f} (reference); mean gap {check.gap.text()} (95% bootstrap "
        f"interval). The judge prefers the completion in {_share(check.judge_prefers_completion)} of "
        f"pairs and the reference in {check.judge_prefers_reference:.1%} (intervals resample prompts). "
        f"Self-preference: {verdict} "
        f"({check.rule})."
    )
    if check.length is not None:
        section.blocks.append(_length_control(check.length))
    if context.rubrics_using_reference:
        section.blocks.append(
            f"Note: {context.rubrics_using_reference} compare with the reference, so the reference was "
            "scored against itself; the gap is not a fair self-preference measure for those rubrics."
        )
    section.blocks.append(Table(
        ["rubric", "mean gap (completion - reference) [95% CI]"],
        [[name, gap.text()] for name, gap in check.gap_by_rubric.items()],
    ))
    if check.by_human_label:
        names = {"reference": "humans prefer the reference (human text)",
                 "completion": "humans prefer the completion (model text)", "equal": "humans: equal"}
        section.blocks.append(Table(
            ["human label", "pairs", "judge prefers completion [95% CI]", "mean gap [95% CI]"],
            [[names[label], str(b.pairs), _share(b.judge_prefers_completion), b.gap.text()]
             for label, b in check.by_human_label.items()],
        ))
    if check.self_preference_rate is not None:
        section.blocks.append(
            "Self-preference rate (the judge prefers the model text where humans preferred the human "
            f"one): {_share(check.self_preference_rate)}."
        )
    section.blocks.append(Figure("Reward gap per pair", plots.gap_histogram(check)))
    if check.by_human_label:
        section.blocks.append(Figure("Judge preference by human label", plots.preference_by_label(check)))
    return section


def comparison_section(comparison: Estimate) -> Section:
    section = Section("Self-preference read as a comparison")
    leaning = comparison.excludes(0.5)
    verdict = {"above": "the judge prefers the completion", "below": "the judge prefers the reference"}.get(
        leaning, "no preference either way")
    section.blocks.append(
        f"{comparison.n} pairs: the judge compared each completion with its human reference side by side, "
        "both orders read, so which text came first cannot decide. Mean P(completion beats reference) "
        f"{comparison.text()} (95% interval, prompts resampled; 0.5 is no preference): {verdict}."
    )
    return section


def _longer_or_shorter(words: float) -> str:
    """A difference in words as a reader says it: "12.0 words longer than", "78.6 words shorter than"."""
    if round(words, 1) == 0:
        return "as long as"
    return f"{abs(words):.1f} words {'longer' if words > 0 else 'shorter'} than"


def _length_control(control: LengthControl) -> str:
    return (
        f"**Length.** Judges tend to reward longer text, and over the {control.pairs} pairs the verdict "
        f"rests on, the completion is {_longer_or_shorter(control.mean_word_difference)} the reference on "
        f"average. Regressing the gap on the difference in words gives a gap at equal length of "
        f"{control.gap_at_equal_length.text()} and {control.gap_per_100_words.text()} per 100 words of "
        f"difference (Spearman of gap and difference {control.gap_and_length.spearman.text()}); the "
        f"{control.matched_pairs} pairs within {MATCHED_WORDS} words (or 10%) of each other have a mean gap "
        f"of {control.matched_gap.text()}. Self-preference controlled for length: {control.verdict}."
    )


def _two_text_warning(correlation: Correlation, what: str) -> list[str]:
    """Per-prompt correlations over two texts are +1 or -1: their mean counts votes."""
    if not correlation.groups_used or correlation.groups_of_two * 2 < correlation.groups_used:
        return []
    return [
        f"**Warning:** {correlation.groups_of_two} of the {correlation.groups_used} prompts behind {what} "
        "have only two texts, whose rank correlation can only be +1 or -1; the mean over prompts is then "
        "a vote count, not a correlation. Read the all-texts figure instead, or add texts per prompt."
    ]


def length_section(checks: Checks) -> Section:
    bias = checks.length_bias
    section = Section("Length bias")
    section.blocks.append(
        f"Rank correlation between the judge's reward and length in words over {len(bias.lengths)} distinct "
        "scored texts (the completions, and the references where they were scored); within prompts it is "
        f"computed per prompt and averaged ({bias.within_prompts.groups_used} prompts used, "
        f"{bias.within_prompts.groups_skipped} skipped: one text, or constant reward or length)."
    )
    section.blocks.append(Table(
        ["scope", "Spearman [95% CI]", "Kendall [95% CI]"],
        [["all texts", *_corr_cells(bias.overall)], ["within prompts", *_corr_cells(bias.within_prompts)]],
    ))
    section.blocks += _two_text_warning(bias.within_prompts, "the within-prompts figure")
    section.blocks.append(Figure("Reward against length", plots.length_scatter(bias)))
    return section


def semscore_section(checks: Checks) -> Section:
    check = checks.semscore
    section = Section("SemScore")
    section.blocks.append(
        f"Cosine similarity of the completion's and the reference's sentence embeddings (Aynedinov & "
        f"Akbik 2024), model **{check.model}** (the paper used all-mpnet-base-v2; values are comparable "
        f"only under one model). Mean SemScore over {check.mean.n} rows: {check.mean.text()}. "
        f"Rank correlation with the judge's reward: Spearman {check.with_judge.spearman.text()}, "
        f"Kendall {check.with_judge.kendall.text()}."
    )
    section.blocks.append(Figure("Judge reward against SemScore", plots.semscore_scatter(check)))
    return section


def agreement_section(checks: Checks) -> Section:
    section = Section("Agreement with humans")
    section.blocks.append(
        "G-Eval protocol: per prompt, Spearman and Kendall between the metric and the human scores "
        "across that prompt's completions, skipping prompts with one completion or a constant side, "
        "then the mean over prompts. Beside it, one correlation over all rows. Intervals resample prompts."
    )
    section.blocks.append(Table(
        ["human score", "metric", "per prompt Spearman", "per prompt Kendall", "prompts used/skipped",
         "all rows Spearman", "all rows Kendall"],
        [[a.human_column, a.metric, *_corr_cells(a.per_prompt),
          f"{a.per_prompt.groups_used}/{a.per_prompt.groups_skipped}", *_corr_cells(a.overall)]
         for a in checks.agreement],
    ))
    for found in checks.agreement:
        section.blocks += _two_text_warning(found.per_prompt, f"the per-prompt {found.metric} figure")
    plotted = [a for a in checks.agreement if not math.isnan(a.per_prompt.spearman.value)]
    if plotted:
        section.blocks.append(Figure("Per-prompt agreement with humans", plots.agreement_bars(plotted)))
    return section


def step_position_section(found: list[StepPosition]) -> Section:
    section = Section("Step position (process rewards)")
    section.blocks.append(
        "Do step scores fall with the step's index whatever the step says? Observed: the mean step score "
        "at each index, and Spearman and Kendall of step score with relative position (0 first step, 1 "
        "last) within each completion, averaged over completions (those with constant scores skipped). "
        "Real solutions may get worse as they go, so a falling trend here is a question. Controlled "
        "(`--step-order-probe N`): each completion of two or more steps was scored again with the same "
        "steps reversed and rotated, so a step is read at several positions with its text unchanged; the "
        "within-step slope of score on position (each step's mean removed) is averaged over completions. "
        "The reordered text no longer reasons in order, so this measures the scorer's sensitivity to "
        "position on reordered text, not how it grades a coherent solution. The correlations' intervals "
        "resample completions, the means' resample prompts."
    )
    for check in found:
        trend = check.trend
        text = (f"**{check.rubric}**: {check.completions} completions; step score against position: "
                f"Spearman {trend.spearman.text()}, Kendall {trend.kendall.text()} "
                f"({trend.groups_used} completions used, {trend.groups_skipped} skipped).")
        if check.probe is None:
            text += " Not probed with reordered steps (`--step-order-probe N`)."
        else:
            text += (f" Steps reordered ({check.probe.n} completions, up to {check.probe_orders} orders each): "
                     f"{check.probe.text()} change in a step's score per step later.")
        if check.detected:
            text += (" **Warning: the scores fall with position alone**: the same step scores lower placed "
                     "later, so this process reward grades where a step stands, not only what it says.")
        section.blocks.append(text)
        section.blocks.append(Table(["step", "steps scored", "mean step score [95% CI]"],
                                    [[index, str(mean.n), mean.text()] for index, mean in check.by_index]))
    return section


def build_sections(context: RunContext, checks: Checks) -> list[Section]:
    sections = [run_section(context, checks)]
    if checks.self_preference:
        sections.append(self_preference_section(checks.self_preference, context))
    if checks.comparison is not None:
        sections.append(comparison_section(checks.comparison))
    if checks.length_bias:
        sections.append(length_section(checks))
    if checks.semscore:
        sections.append(semscore_section(checks))
    if checks.agreement:
        sections.append(agreement_section(checks))
    if checks.step_position:
        sections.append(step_position_section(checks.step_position))
    return sections


def to_markdown(title: str, sections: list[Section]) -> str:
    lines = [f"# {title}", ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Table):
                lines.append(markdown_table(block.header, block.rows))
            elif isinstance(block, Figure):
                lines.append(f"*Plot: {block.caption} (see report.html).*")
            else:
                lines.append(block)
            lines.append("")
    return "\n".join(lines)


def _inline(text: str) -> str:
    """Markdown's `code` and **bold** in escaped HTML."""
    escaped = html.escape(text)
    for mark, tag in (("**", "strong"), ("`", "code")):
        parts = escaped.split(mark)
        escaped = "".join(p if i % 2 == 0 else f"<{tag}>{p}</{tag}>" for i, p in enumerate(parts))
    return escaped


def _html_text(text: str) -> str:
    paragraphs = []
    for part in text.split("\n\n"):
        if part.lstrip().startswith("- "):
            items = "".join(f"<li>{_inline(line.strip()[2:])}</li>" for line in part.splitlines())
            paragraphs.append(f"<ul>{items}</ul>")
        else:
            paragraphs.append(f"<p>{_inline(part)}</p>")
    return "".join(paragraphs)


def to_html(title: str, sections: list[Section]) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for section in sections:
        body.append(f"<h2>{html.escape(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, Table):
                head = "".join(f"<th>{html.escape(h)}</th>" for h in block.header)
                rows = "".join(
                    "<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in block.rows
                )
                body.append(f"<table><tr>{head}</tr>{rows}</table>")
            elif isinstance(block, Figure):
                data = base64.b64encode(block.png).decode("ascii")
                body.append(
                    f'<figure><img alt="{html.escape(block.caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(block.caption)}</figcaption></figure>"
                )
            else:
                body.append(_html_text(block))
    style = (
        "body{font-family:sans-serif;max-width:60rem;margin:2rem auto;line-height:1.45}"
        "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #bbb;padding:.25rem .5rem}"
        "th{background:#eee}figure{margin:1rem 0}code{background:#f3f3f3}"
    )
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n"
    )
