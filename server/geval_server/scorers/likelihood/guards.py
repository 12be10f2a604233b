"""Text guards of the likelihood scorer: a completion that copies its source or repeats
itself reads as likely to any language model, so its reward is scaled down past a limit."""

from __future__ import annotations

import re

COPY_NGRAM = 5  # a copied span: 5 words in a row found in the source
REPEAT_NGRAM = 3  # a repeated span: 3 words in a row seen earlier in the completion


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def copy_rate(completion: str, source: str) -> float:
    """Share of the completion's word 5-grams found verbatim in the source (0 when shorter)."""
    spans = _ngrams(_words(completion), COPY_NGRAM)
    if not spans:
        return 0.0
    in_source = set(_ngrams(_words(source), COPY_NGRAM))
    return sum(span in in_source for span in spans) / len(spans)


def repetition_rate(completion: str) -> float:
    """Share of the completion's word 3-grams that repeat an earlier one."""
    spans = _ngrams(_words(completion), REPEAT_NGRAM)
    if not spans:
        return 0.0
    return 1.0 - len(set(spans)) / len(spans)


def guard_factor(rate: float, limit: float | None) -> float:
    """1 up to the limit, falling linearly to 0 at a rate of 1."""
    if limit is None or rate <= limit:
        return 1.0
    return max(0.0, 1.0 - (rate - limit) / (1.0 - limit))
