"""Holds a read back while another read that shares a long prefix with it is in flight, so
that vLLM computes the shared prefix once and the held read finds it in the prefix cache.

vLLM finds a prefix in its cache only once a step has computed it: reads sent together
are scheduled together, and each computes their common prefix again. Cold, the 56
comparisons of a group of 8 took 7x their warm time, and the 8 completions of a GRPO
group each computed their article (benchmarks/groupwise_meta.py, cold against warm).
With the gate, the first read of a prefix goes alone and the others follow it, one
engine step later, as cache hits.

Prefixes are compared in whole KV-cache blocks (the unit of a cache hit), by a chain of
block hashes as vLLM keys its cache. A read waits only when the prefix it shares with a
read in flight is at least MIN_BLOCKS longer than the prefix this gate has already seen
answered: a rubric's opening that an earlier call computed is not worth a wait. What has
been answered is kept for the last KEPT_BLOCKS blocks; vLLM may have evicted some of
them, and a read then computes its prefix again, as it would without the gate.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence

MIN_BLOCKS = 4  # 128 tokens at the CPU block size: less is computed faster than waited for
KEPT_BLOCKS = 1 << 16


class PrefixGate:
    def __init__(self, block_size: int) -> None:
        self._block_size = block_size
        self._in_flight: dict[int, asyncio.Event] = {}  # block-prefix hash -> set once its read is answered
        self._answered: OrderedDict[int, None] = OrderedDict()

    def hashes(self, ids: Sequence[int]) -> list[int]:
        """The hash of each whole-block prefix of `ids`, shortest first."""
        size, chain, hashes = self._block_size, 0, []
        for start in range(0, len(ids) - size + 1, size):
            chain = hash((chain, tuple(ids[start:start + size])))
            hashes.append(chain)
        return hashes

    async def wait(self, hashes: list[int]) -> None:
        """Returns once no read in flight shares a prefix worth waiting for."""
        while True:
            answered = 0
            while answered < len(hashes) and hashes[answered] in self._answered:
                answered += 1
            event = next((self._in_flight[h] for h in reversed(hashes[answered + MIN_BLOCKS - 1:])
                          if h in self._in_flight), None)
            if event is None:
                return
            await event.wait()

    def enter(self, hashes: list[int]) -> asyncio.Event:
        """Marks the read's prefixes as in flight (those no other read holds)."""
        event = asyncio.Event()
        for h in hashes:
            self._in_flight.setdefault(h, event)
        return event

    def leave(self, hashes: list[int], event: asyncio.Event) -> None:
        """The read is answered (or failed): its prefixes are answered, its followers go."""
        for h in hashes:
            if self._in_flight.get(h) is event:
                del self._in_flight[h]
            self._answered[h] = None
            self._answered.move_to_end(h)
        while len(self._answered) > KEPT_BLOCKS:
            self._answered.popitem(last=False)
        event.set()
