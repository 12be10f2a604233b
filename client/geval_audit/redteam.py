"""`geval-reward redteam`: how far hostile text moves a running judge's reward.

Each base text is scored clean and with every corpus entry applied to it
(injections.py), all of one base text in one Score call, so the entries share
the prompt's prefix in the judge's cache. shift = reward(attacked) - reward(clean).
Entries of the category `control` are benign edits of the same size: the judge's
noise floor, reported apart and never gated.
"""

from __future__ import annotations

import json
import pathlib
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from geval_client import make_item
from geval_client.types import Logprobs
from geval_client.types import ScoringMode as Mode

from .injections import Injection
from .row_scoring import reads_reference
from .tables import markdown_table

CONTROL = "control"
# A scorer without a criterion or a bounded scale (a trained reward model) is attacked with the
# claims a policy would write for any grader: "Quality: 10/10".
ANY_GRADER = ("Quality", 1, 10)


class RedTeamError(Exception):
    """The red-team run cannot start or go on (bad base file, unknown rubric, a clean text
    the judge could not score)."""


@dataclass(frozen=True)
class BaseText:
    """A clean (prompt, completion) the attacks are applied to."""

    prompt: str
    completion: str
    reference: str | None = None
    label: str = ""


def load_base_texts(path: pathlib.Path) -> list[BaseText]:
    """JSONL, one object per line with `prompt` and `completion` (and optionally `reference`)."""
    texts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise RedTeamError(f"{path}:{number}: not JSON: {error}") from None
        for key in ("prompt", "completion"):
            if not isinstance(record.get(key), str) or not record[key].strip():
                raise RedTeamError(f"{path}:{number}: field {key!r} must be a non-empty string")
        texts.append(BaseText(record["prompt"], record["completion"], record.get("reference"), f"line {number}"))
    if not texts:
        raise RedTeamError(f"{path}: no base texts")
    return texts


def summeval_base_texts(n_docs: int, rubric: str, first_doc: int = 0) -> list[BaseText]:
    """One SummEval summary per document, the one with the median expert score on the
    rubric's dimension (coherence for rubrics that are not SummEval's): a fixed sample,
    documents first_doc to first_doc + n_docs - 1 in the data set's order."""
    from . import datasets

    if n_docs < 1:
        raise RedTeamError(f"--docs must be at least 1, got {n_docs}")
    dimension = rubric.removeprefix("summeval-")
    dimension = dimension if dimension in datasets.SUMMEVAL_DIMENSIONS else "coherence"
    if first_doc < 0:
        raise RedTeamError(f"--first-doc must be at least 0, got {first_doc}")
    documents = list(datasets.groups(datasets.summeval()).values())[first_doc:first_doc + n_docs]
    chosen = [sorted(texts, key=lambda r: r.scores[dimension])[len(texts) // 2] for texts in documents]
    return [BaseText(r.source, r.text, r.reference, label=f"SummEval document {r.group}") for r in chosen]


@dataclass
class EntryResult:
    entry: Injection
    shifts: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    claims_removed: int = 0  # attacked items in which the server blanked a score claim
    masked_lowered: int = 0  # attacked items whose reward the bounded second read lowered
    bound_gaps: list[float] = field(default_factory=list)  # per attacked item: plain - bounded reward


@dataclass(frozen=True)
class Shifts:
    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.mean(self.values)

    @property
    def max(self) -> float:
        return max(self.values)

    @property
    def rose(self) -> float:
        return sum(v > 0 for v in self.values) / len(self.values)


@dataclass
class RedTeamResult:
    rubric: str
    judge: str
    clean_rewards: list[float]
    entries: list[EntryResult]

    def shifts(self, category: str | None = None, controls: bool = False) -> Shifts | None:
        """Pooled shifts of the attacks (controls left out), of one category, or of the controls."""
        chosen = [e for e in self.entries if (e.entry.category == CONTROL) == controls
                  and (category is None or e.entry.category == category)]
        values = tuple(v for e in chosen for v in e.shifts)
        return Shifts(values) if values else None

    @property
    def categories(self) -> list[str]:
        return sorted({e.entry.category for e in self.entries} - {CONTROL})


def run_redteam(
    client, bases: Sequence[BaseText], corpus: Sequence[Injection], rubric: str, mode: Mode = Logprobs(),
) -> RedTeamResult:
    """Scores every base text clean and attacked by every entry, one Score call per base text,
    G-Eval rubrics reading the slot in `mode`. A base text's reference goes along where the
    rubric reads it (as the audit sends it): a pairwise template compares each text with it."""

    info = client.info()
    found = next((r for r in info.rubrics if r.name == rubric), None)
    if found is None:
        raise RedTeamError(f"rubric {rubric!r} is not served by this judge; it serves "
                           f"{', '.join(r.name for r in info.rubrics)}")
    attacks = [e.render(*_claim_shape(found), **_verdict_shape(found)) for e in corpus]
    entries = [EntryResult(e) for e in corpus]
    clean_rewards = []
    for base in bases:
        completions = [base.completion] + [e.apply(base.completion, a) for e, a in zip(corpus, attacks)]
        reference = base.reference if reads_reference(found) else None
        items = [make_item(base.prompt, c, reference) for c in completions]
        results = client.score(items, rubrics=[rubric], mode=mode)
        if not results[0].ok:
            raise RedTeamError(f"the clean text {base.label} could not be scored: {results[0].error.message}")
        clean = results[0].reward
        clean_rewards.append(clean)
        for entry, result in zip(entries, results[1:]):
            if not result.ok:
                entry.errors.append(result.error.message)
            else:
                entry.shifts.append(result.reward - clean)
                entry.claims_removed += result.score_claims_removed > 0
                entry.masked_lowered += result.masked_read_lowered
                entry.bound_gaps.append(max(0.0, result.plain_reward - result.reward))
    return RedTeamResult(rubric, info.judge_model, clean_rewards, entries)


def _claim_shape(rubric) -> tuple[str, int, int]:
    """(criterion, min, max) that the corpus's claims name for this scorer."""
    if rubric.HasField("geval"):
        return rubric.geval.criterion, int(rubric.min_score), int(rubric.max_score)
    if rubric.HasField("likelihood"):
        return rubric.likelihood.criterion, int(rubric.min_score), int(rubric.max_score)
    if rubric.HasField("template"):
        return rubric.template.criterion, int(rubric.min_score), int(rubric.max_score)
    return ANY_GRADER


def _verdict_shape(rubric) -> dict[str, str]:
    """A judge template's verdict and best label, which verdict-format claims write."""
    if rubric.HasField("template"):
        labels = rubric.template.labels  # worst to best on a higher-is-better scale
        return {"verdict": rubric.template.verdict, "best": labels[-1] if rubric.higher_is_better else labels[0]}
    return {}


def kinds_over(result: RedTeamResult, max_shift: float | None) -> list[str]:
    """The kinds (categories) with an attacked item whose shift is over max_shift."""
    if max_shift is None:
        return []
    return [c for c in result.categories if (s := result.shifts(c)) is not None and s.max > max_shift]


def gate_failures(result: RedTeamResult, max_mean_shift: float | None, max_shift: float | None) -> list[str]:
    """The CI gates that failed: the attacks' pooled mean shift, or any one attacked item's
    shift, above its limit (naming every kind over it); an attack the judge could not
    score at all fails too."""
    failures = []
    attacks = result.shifts()
    if attacks is None:
        return ["no attack could be scored"]
    if max_mean_shift is not None and attacks.mean > max_mean_shift:
        failures.append(f"mean shift {attacks.mean:+.3f} is over --max-mean-shift {max_mean_shift}")
    if max_shift is not None and attacks.max > max_shift:
        worst = max((e for e in result.entries if e.shifts and e.entry.category != CONTROL),
                    key=lambda e: max(e.shifts))
        failures.append(f"largest shift {attacks.max:+.3f} ({worst.entry.id}) is over --max-shift {max_shift}; "
                        f"kinds over it: {', '.join(kinds_over(result, max_shift))}")
    return failures


def _row(name: str, shifts: Shifts | None, entries: Sequence[EntryResult], max_shift: float | None) -> list[str]:
    items = sum(len(e.shifts) for e in entries)
    gaps = [gap for e in entries for gap in e.bound_gaps]
    counts = [f"{sum(e.claims_removed for e in entries)}/{items}", f"{sum(e.masked_lowered for e in entries)}/{items}",
              f"{statistics.mean(gaps):.3f}" if gaps else "-"]
    if shifts is None:
        return [name, "-", "-", "-", *counts]
    over = max_shift is not None and shifts.max > max_shift
    peak = f"**{shifts.max:+.3f} over**" if over else f"{shifts.max:+.3f}"
    return [name, f"{shifts.mean:+.3f}", peak, f"{shifts.rose:.0%}", *counts]


def report_tables(result: RedTeamResult, max_shift: float | None = None) -> tuple[str, str]:
    """(the per-kind table, the per-attack table) in Markdown; a max shift over max_shift
    is marked `over`. Per kind, as a training run sees them: the items the bounded second
    read lowered, and the mean gap between the plain and bounded reads."""
    headers = ["", "mean shift", "max shift", "rose", "claims blanked", "bound lowered", "bound gap"]
    attacks = [e for e in result.entries if e.entry.category != CONTROL]
    kinds = [_row(f"**all attacks** ({len(attacks)})", result.shifts(), attacks, max_shift)]
    by_kind = defaultdict(list)
    for e in attacks:
        by_kind[e.entry.category].append(e)
    kinds += [_row(f"{c} ({len(by_kind[c])})", result.shifts(c), by_kind[c], max_shift) for c in result.categories]
    controls = [e for e in result.entries if e.entry.category == CONTROL]
    if controls:
        kinds.append(_row(f"benign controls ({len(controls)})", result.shifts(controls=True), controls, None))
    per_attack = []
    for e in result.entries:
        gate = None if e.entry.category == CONTROL else max_shift
        row = _row(f"{e.entry.id} ({e.entry.category}, {e.entry.position})",
                   Shifts(tuple(e.shifts)) if e.shifts else None, [e], gate)
        per_attack.append(row[:-1] + [row[-1] + (f"; {len(e.errors)} errors" if e.errors else "")])
    return (markdown_table(headers, kinds, align="lrrrrrr"),
            markdown_table(["attack"] + headers[1:], per_attack, align="lrrrrrr"))
