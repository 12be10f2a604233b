"""The defences a completion passes before a score slot reads it, in the order applied.

Each removal is one module with one object, `remove(text) -> (text, spans removed)`:
1. score_claims.py: claims of a score for a criterion the judge reads (`Coherence: 5`);
2. grader_lines.py: lines and blocks that speak to the grader instead of the reader;
both remove from what every slot reader reads, and their counts add up to the item's
`score_claims_removed`. Then
3. slot_mask.py, the bound: the text with every word that addresses the score slot (the
criteria's names, the form's heading, in any spelling a reader reads) removed and every
numeral masked (numeral_mask.py). The judge always reads that bounded text; it reads the
text as written too, keeping the lower reward, only where the bound hid something the
judge may need and the item's source does not vouch for (`Defences.reads`). A claim no
rule recognized can then only lower the reward, and most texts are read once.
boundaries.py works inside the prompt instead (every prompt escapes the tags that fence
user text), so it is always on and not in this chain.

A new removal is a module here and a line in `defences_for`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol

from geval_server.defences.grader_lines import GraderLineRemover
from geval_server.defences.numeral_mask import numerals
from geval_server.defences.score_claims import ScoreClaimRemover
from geval_server.defences.slot_mask import SlotMask


@dataclass(frozen=True)
class DefenceSettings:
    """Which defences a server runs (`--keep-score-claims`, `--no-masked-read-bound`)."""

    remove_score_claims: bool = True
    masked_read_bound: bool = True

    @property
    def policy(self) -> str:
        """The settings as a content hash names them: they change what the judge reads
        (`bounded-read`: the bounded text read, and as written too only where `reads` says;
        servers that read every changed text twice named it `masked-read-bound`)."""
        policy = "score-claims-removed" if self.remove_score_claims else "score-claims-kept"
        return policy + (":bounded-read" if self.masked_read_bound else "")


class Defence(Protocol):
    def remove(self, text: str) -> tuple[str, int]:
        """(the text with what the defence catches removed, how many spans were)."""


@dataclass(frozen=True)
class SlotReads:
    """What a completion's slot readers read: `first`, and where `second` is set that text
    too, the lower reward kept."""

    first: str
    second: str | None = None


@dataclass(frozen=True)
class Defences:
    removals: tuple[Defence, ...]  # applied in order to what every slot reader reads
    bound: SlotMask | None  # the bounded read's rewrite of that text; None: the text as it is

    def removed(self, text: str) -> tuple[str, int]:
        """The text every slot reader reads, and the spans removed from it."""
        total = 0
        for defence in self.removals:
            text, count = defence.remove(text)
            total += count
        return text, total

    def reads(self, text: str, prompt: str, reference: str | None = None) -> SlotReads:
        """The reads of `text` (claims removed) that the reward is the lowest of. The bounded
        text is always among them. The text as written is read too only where the bound hides
        something the judge may need to see and the item's source does not vouch for: a
        clause removed, or a numeral no source holds (a number the judge must check; the
        numbers a summary quotes are its source's): the item's prompt and reference.
        Most texts with numbers quote them, so they are read once, masked."""
        if self.bound is None:
            return SlotReads(text)
        masked = self.bound.mask(text)
        if not masked.changed:
            return SlotReads(text)
        bounded = self._unpadded(masked.text)
        if not masked.clauses_removed and (numerals(prompt) | numerals(reference or "")).issuperset(masked.numerals):
            return SlotReads(bounded)
        return SlotReads(text, bounded)

    def bounded(self, text: str) -> str:
        """`text` as the bounded read reads it (as `reads` makes it): a piece of a completion, such
        as a step the caller sent, rewritten as the whole completion was."""
        return text if self.bound is None else self._unpadded(self.bound.mask(text).text)

    def _unpadded(self, masked: str) -> str:
        # What the removal leaves can be padding the removals cut (`\n\n\n\n` where a line
        # went): cut here too, so the bounded read is of text a completion could be read as.
        return self.removed(masked)[0]


@functools.lru_cache(maxsize=64)
def defences_for(criteria: frozenset[str], settings: DefenceSettings) -> Defences:
    """The chain for the criteria whose claims a call removes, built once per set: most calls
    share the served set."""
    removals: tuple[Defence, ...] = ()
    if settings.remove_score_claims and criteria:
        removals = (ScoreClaimRemover(sorted(criteria)), GraderLineRemover(sorted(criteria)))
    return Defences(removals, SlotMask(sorted(criteria)) if settings.masked_read_bound else None)
