"""Prompt log-probabilities of a batch of reads when vLLM's prefix cache is read.

vLLM computes prompt log-probabilities only for the positions it runs; a position the
prefix cache held comes back as a placeholder. The text read comes last, so a group
reading one source normally computes every token of it. But texts often share an
opening (extractive summaries begin with the article's first sentence, a GRPO group's
samples begin alike), and a cache hit then reaches past the text's start. A token's
log-probability depends only on the tokens up to it, so the read of the batch that
computed that opening holds the value: each position is keyed by a digest of the
prompt up to and including it, and only what no read of the batch computed is left to
read one position at a time.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ComputedRead:
    """One read as vLLM answered it: log p of ids[first_computed:], each given the tokens before it."""

    ids: Sequence[int]
    start: int  # where the text read begins
    first_computed: int  # >= start; the positions start..first_computed-1 came from the cache
    computed: Sequence[float]

    def keys(self) -> list[bytes]:
        """For each position i from start on, a digest of ids[: i + 1]."""
        digest = hashlib.blake2b(array("i", self.ids[: self.start]).tobytes(), digest_size=16)
        keys = []
        for token in self.ids[self.start :]:
            digest.update(array("i", (token,)).tobytes())
            keys.append(digest.digest())
        return keys


def fill_from_batch(reads: Sequence[ComputedRead]) -> list[list[float | None]]:
    """Per read: the log-probability of each position from its start on, None where no read
    of the batch computed it."""
    if all(read.first_computed == read.start for read in reads):
        return [list(read.computed) for read in reads]  # the usual batch: nothing missing, nothing to key
    known: dict[bytes, float] = {}
    keyed = []
    for read in reads:
        keys = read.keys()
        keyed.append(keys)
        known.update(zip(keys[read.first_computed - read.start :], read.computed))
    return [[known.get(key) for key in keys] for keys in keyed]
