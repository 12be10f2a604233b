"""Rubrics sent by callers with their requests (a rubric per batch, or per item:
rubrics as rewards). Each distinct rubric is prepared once (evaluation steps
written by the judge where missing, score slot found) and kept; a training job
changes what it rewards without restarting the server, and a rubric sent with
every step costs its preparation only the first time.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from geval_server.scorers.base import Scorer
from geval_server.scorers.geval.rubrics import Rubric


class InlineRubrics:
    """Prepared rubrics by content, the least recently used dropped beyond `capacity`.
    Calls that bring the same new rubric at once share one preparation, and it runs
    as its own task: other calls are not held up, and a cancelled call does not cancel
    a preparation that others wait for. A failed preparation is not kept."""

    def __init__(self, prepare: Callable[[Rubric], Awaitable[Scorer]], capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._prepare = prepare
        self._ready: OrderedDict[Rubric, Scorer] = OrderedDict()
        self._pending: dict[Rubric, asyncio.Future] = {}

    def __len__(self) -> int:
        return len(self._ready)

    async def scorer(self, rubric: Rubric) -> Scorer:
        if rubric in self._ready:
            self._ready.move_to_end(rubric)
            return self._ready[rubric]
        preparing = self._pending.get(rubric)
        if preparing is None:
            preparing = asyncio.ensure_future(self._prepare(rubric))
            self._pending[rubric] = preparing
            preparing.add_done_callback(lambda done: self._settle(rubric, done))
        return await asyncio.shield(preparing)

    def _settle(self, rubric: Rubric, done: asyncio.Future) -> None:
        del self._pending[rubric]
        if done.cancelled() or done.exception() is not None:
            return
        self._ready[rubric] = done.result()
        while len(self._ready) > self.capacity:
            self._ready.popitem(last=False)
