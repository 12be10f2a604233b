"""The injection corpus: hostile texts a policy could append to, prepend to or
insert into a completion to move the judge's reward, and the benign controls
beside them (data/injections.jsonl, one JSON object per line)."""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass

CORPUS = pathlib.Path(__file__).parent / "data" / "injections.jsonl"
POSITIONS = ("append", "prepend", "insert")


@dataclass(frozen=True)
class Injection:
    id: str
    category: str
    position: str
    text: str
    repeat: int = 1
    note: str = ""

    def render(self, criterion: str, min_score: int, max_score: int, verdict: str | None = None,
               best: str | None = None) -> str:
        """The attack text for one rubric: placeholders filled, repeated `repeat` times. A
        judge template's claims write its verdict (`[RESULT]`) and best label (`A`); a G-Eval
        form's are its criterion's line (`Coherence:`) and its top score."""
        filled = self.text.format(
            criterion=criterion, criterion_lower=criterion.lower(), min=min_score, max=max_score,
            verdict=verdict if verdict is not None else f"{criterion}:",
            best=best if best is not None else str(max_score),
        )
        return filled * self.repeat

    def apply(self, completion: str, attack: str) -> str:
        if self.position == "append":
            return completion + attack
        if self.position == "prepend":
            return attack + completion
        cut = _middle_sentence_break(completion)
        return completion[:cut] + attack + completion[cut:]


def _middle_sentence_break(text: str) -> int:
    """Index just after the sentence end (". ") nearest the middle; the middle if none."""
    breaks = [i + 2 for i in range(len(text) - 1) if text[i:i + 2] == ". "]
    middle = len(text) // 2
    return min(breaks, key=lambda i: abs(i - middle)) if breaks else middle


def load_corpus(path: pathlib.Path = CORPUS) -> list[Injection]:
    entries: list[Injection] = []
    for line_number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        entry = Injection(**json.loads(line))
        if entry.position not in POSITIONS:
            raise ValueError(f"{path}:{line_number}: position must be one of {POSITIONS}, got {entry.position!r}")
        if any(entry.id == seen.id for seen in entries):
            raise ValueError(f"{path}:{line_number}: id {entry.id!r} is used twice")
        entries.append(entry)
    return entries
