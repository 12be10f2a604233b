"""The bounded read's text: the completion with every word that addresses the judge's
score slot removed, with the rest of its clause, and every numeral masked.

The judge's slot is its own form line, `- Coherence:`. A completion that writes the
criterion's name followed by anything (`Coherence: fifth`, `Coherence: ✓`, `- Coherence:`
with no value at all) hands the judge an earlier instance of that slot to copy from.
Values are spelled without end; the slot's own words are few and known to the server: the
criteria it reads and the form's heading. So this read takes out those words, in every way
a reader still reads them, and what follows them to the end of their clause (sentence or
line), and masks numerals (numeral_mask.py). A text that lost a clause is read as written
too and the lower reward kept (chain.py), so whatever follows a name can only lower it.

A word addresses the slot when, in the reader's view (reader_text.py: case, width,
look-alike letters, invisible characters):
- its letters, read across the marks between them (`C o h e r e n c e`, `Coher-\nence`,
  `co_her_ence`), spell a criterion's name anywhere, or start with the name's stem at a
  word's start (`coherent`, `coherency`);
- it is a criterion's name with one or two letters changed (`Coherance`, `Cohҽrence` with a
  letter no fold table knows), as score_claims.close_to reads it;
- it is the form's heading (`Evaluation Form`).
Removing a word can join the text around it into a new one (`CoheCoherencerence`), so the
removal repeats until nothing is left to remove: the bounded text holds no criterion's
name, so the mask cannot write a line such as `Coherence: #`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from geval_server.defences.numeral_mask import mask_numerals
from geval_server.defences.reader_text import ReaderView, merged_spans, reader_view, replace_spans, skeleton_text
from geval_server.defences.score_claims import close_to
from geval_server.scorers.geval.prompts import FORM_HEADER

_LETTER_RUN = re.compile(r"[^\W\d_]+")
# To the sentence's end or the line's, the mark kept; a point inside a number (`4.5`) ends nothing.
_CLAUSE_REST = re.compile(r"(?:[^.!?;\n]|[.!?;](?=\S))*")
_STEM_MIN = 5  # as score_claims.close_to: a derived word shares all but the name's last three letters
_FORM_WORDS = FORM_HEADER.split("(")[0]  # `Evaluation Form`


def _letters(text: str) -> str:
    return "".join(_LETTER_RUN.findall(skeleton_text(text)))


@dataclass(frozen=True)
class MaskedText:
    """The bounded read's text and what the mask hid to make it."""

    text: str
    clauses_removed: int  # clauses that addressed the slot (a criterion's name, the form's heading)
    numerals: tuple[str, ...]  # the numerals masked, as the reader reads them

    @property
    def changed(self) -> bool:
        return bool(self.clauses_removed or self.numerals)


class SlotMask:
    """Built once per set of criteria: the chain's bound."""

    def __init__(self, criteria: Iterable[str]) -> None:
        names = sorted({_letters(c) for c in criteria} - {""})
        self._anywhere = tuple(names) + (_letters(_FORM_WORDS),)
        self._stems = tuple(name[:max(_STEM_MIN, len(name) - 3)] for name in names)
        words = [name for name in names if _LETTER_RUN.fullmatch(name)]
        # close_to needs the name's first letter: a word is held only against the names it starts like.
        self._words_by_initial = {i: tuple(n for n in words if n[0] == i) for i in {n[0] for n in words}}
        # Whether a word is near a name, kept per word: a GRPO group's completions share most of
        # their words, and this test was half of the defences' cost per SummEval summary.
        self._near_name = functools.lru_cache(maxsize=1 << 16)(self._near_any_name)

    def mask(self, text: str) -> MaskedText:
        """The text with the slot's words removed and its numerals masked."""
        removed = 0
        while spans := self._slot_spans(view := reader_view(text)):
            text = replace_spans(text, view.source_index, spans, "")
            removed += len(spans)
        text, masked = mask_numerals(text)
        return MaskedText(text, removed, masked)

    def _slot_spans(self, view: ReaderView) -> list[tuple[int, int]]:
        """Spans of the view's skeleton that address the slot, sorted and merged."""
        letters = "".join(view.words)
        near = {word for word in view.distinct if word[:1] in self._words_by_initial and self._near_name(word)}
        if not near and not any(target in letters for target in self._anywhere + self._stems):
            return []  # most texts: no walk
        runs = [found.span() for found in _LETTER_RUN.finditer(view.skeleton)]
        # Each letter of `letters` at its skeleton index; where each run starts in `letters`.
        index = [i for start, end in runs for i in range(start, end)]
        run_starts, at = set(), 0
        for start, end in runs:
            run_starts.add(at)
            at += end - start
        spans = []
        for target in self._anywhere:
            spans += _found(letters, target, index, anywhere=True, run_starts=run_starts)
        for stem in self._stems:
            spans += _found(letters, stem, index, anywhere=False, run_starts=run_starts)
        spans += [span for span in runs if view.skeleton[span[0]:span[1]] in near]
        return merged_spans([(start, _clause_end(view.skeleton, end)) for start, end in spans])

    def _near_any_name(self, word: str) -> bool:
        return any(close_to(word, name) for name in self._words_by_initial[word[0]])


def _found(letters: str, target: str, index: list[int], anywhere: bool,
           run_starts: set[int]) -> list[tuple[int, int]]:
    """Skeleton spans of each occurrence of `target` in the letters; a stem only where it
    starts a run of letters (`fluen` is in `influence`, which says nothing of fluency)."""
    spans, at = [], letters.find(target)
    while at >= 0:
        if anywhere or at in run_starts:
            spans.append((index[at], index[at + len(target) - 1] + 1))
        at = letters.find(target, at + 1)
    return spans


def _clause_end(skeleton: str, end: int) -> int:
    """Where the clause the span ends in ends: a name's value goes with it, whatever its
    spelling (`Coherence: fivefold` lifted the embedded judge's reward by 0.17 with only the
    name removed, `- : fivefold` still shaped like the form's line)."""
    return _CLAUSE_REST.match(skeleton, end).end()

