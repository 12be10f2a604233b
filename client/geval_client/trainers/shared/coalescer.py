"""One-item calls that arrive together, sent as one call: for frameworks that score each
rollout on its own (verifiers), so that the server still gets batches.

The first item a Coalescer takes opens a batch; the batch is sent `window_s` later, or at
once when it holds `max_items`. Each caller awaits its own item's result; an error of the
call as a whole (the server unreachable, a deadline) reaches every caller of that batch.
A caller cancelled before its batch is sent is left out of it.

A Coalescer belongs to the event loop it is first used in (its timer and futures do);
coalescer_for keeps one per loop and key.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Coalescer(Generic[T, R]):
    """send(items) returns one result per item, in order."""

    def __init__(self, send: Callable[[list[T]], Awaitable[Sequence[R]]], window_s: float, max_items: int) -> None:
        if window_s < 0 or max_items < 1:
            raise ValueError(f"window_s must be >= 0 and max_items >= 1, got {window_s} and {max_items}")
        self._send, self._window_s, self._max_items = send, window_s, max_items
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._in_flight: set[asyncio.Task] = set()  # referenced until done: the loop keeps only weak ones

    async def __call__(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append((item, future))
        if len(self._pending) >= self._max_items:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self._window_s, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch = [(item, future) for item, future in self._pending if not future.done()]
        self._pending = []
        if batch:
            task = asyncio.ensure_future(self._deliver(batch))
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)

    async def _deliver(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            results = await self._send([item for item, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"a coalesced call of {len(batch)} items answered {len(results)}")
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as error:
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        for (_, future), result in zip(batch, results):
            if not future.done():
                future.set_result(result)


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, Coalescer]] = (
    weakref.WeakKeyDictionary()
)


def coalescer_for(key: Hashable, make: Callable[[], Coalescer[T, R]]) -> Coalescer[T, R]:
    """The running event loop's Coalescer for key, made on first use."""
    coalescers = _by_loop.setdefault(asyncio.get_running_loop(), {})
    if key not in coalescers:
        coalescers[key] = make()
    return coalescers[key]
