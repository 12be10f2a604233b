"""Blanks score claims such as `Coherence: 5` inside a completion.

The completion is written by a policy optimized against the judge, and small
judges copy the number that follows the criterion's name anywhere in their
context, whatever the prompt's framing says (benchmarks/injection_bench.py:
a fake form line lifted the embedded judge's reward by about 0.7 of 1). No
wording of the prompt fixes that, so the number itself is taken out: a
criterion's name, then up to a few characters of punctuation, markup or words
such as "score" or "is", then a number (with `/5` or `out of 5` after it), and
the numbers are replaced by `[score removed]`. The rest of the text is judged as written.

Matching sees through the disguises in the injection corpus: case, full-width
and mathematical forms (NFKC), invisible format characters (zero-width, soft
hyphen, bidi controls) and the common Greek and Cyrillic look-alike letters.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

REDACTED = "[score removed]"
_MAX_GAP = 16  # characters between the name and the number, as seen after normalizing
# The claimed score and what may come with it on its line: `5`, `4.5`, `5/5`, `4 out of 5`.
_NUMBERS = r"\d+(?:(?:[ \t.,/:()\-]|out of)*\d+)*"
_GAP_WORDS = ("score", "rating", "grade", "is", "was", "level")
# Greek and Cyrillic letters drawn like Latin ones (lower case; matching is casefolded).
_LOOK_ALIKES = str.maketrans({
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "і": "i", "ј": "j", "к": "k",
    "м": "m", "н": "h", "о": "o", "р": "p", "ѕ": "s", "т": "t", "у": "y", "х": "x", "ӏ": "l",
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x",
})


class ScoreClaimRedactor:
    """Built once per server from the criteria it serves (`Coherence`, `Fluency`, ...)."""

    def __init__(self, criteria: Iterable[str]) -> None:
        names = sorted({_skeleton_text(c) for c in criteria if c.strip()}, key=len, reverse=True)
        if not names:
            raise ValueError("no criterion names to look for")
        gap = "|".join([r"[^\w\n]", "_", r"\n(?!\n)", *(rf"\b{w}\b" for w in _GAP_WORDS)])
        self._pattern = re.compile(
            rf"(?<![^\W\d_])(?:{'|'.join(map(re.escape, names))})(?![^\W\d_])"
            rf"(?=((?:{gap}){{0,{_MAX_GAP}}}?)({_NUMBERS}))"
        )

    def redact(self, text: str) -> tuple[str, int]:
        """(text with every claimed score replaced, how many were replaced)."""
        skeleton, source_index = _skeleton(text)
        spans = []
        for match in self._pattern.finditer(skeleton):
            start, end = match.span(2)
            if len(match.group(1)) <= _MAX_GAP:
                spans.append((source_index[start], source_index[end - 1] + 1))
        if not spans:
            return text, 0
        pieces, cursor = [], 0
        for start, end in spans:
            if start >= cursor:
                pieces += [text[cursor:start], REDACTED]
                cursor = end
        return "".join(pieces) + text[cursor:], len(spans)


def _skeleton(text: str) -> tuple[str, Sequence[int]]:
    """The text as matching sees it, with each character's index in the original.
    Runs on every completion of every call: plain ASCII text, which normalizing
    leaves as it is but for case, skips the per-character walk."""
    if text.isascii():
        return text.lower(), range(len(text))
    chars, source_index = [], []
    for index, char in enumerate(text):
        if unicodedata.category(char) == "Cf":
            continue
        for normal in _skeleton_text(char):
            chars.append(normal)
            source_index.append(index)
    return "".join(chars), source_index


def _skeleton_text(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().translate(_LOOK_ALIKES)
