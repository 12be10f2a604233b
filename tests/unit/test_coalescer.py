"""The Coalescer (trainers/shared/coalescer.py): one-item calls that arrive together go out as
one call, and each caller gets its own item's result or the error of its call."""

from __future__ import annotations

import asyncio

import pytest
from geval_client.trainers.shared.coalescer import Coalescer, coalescer_for


class Send:
    """A fake batched call: each item's result is its double; items named in `fail` fail the call."""

    def __init__(self, fail: frozenset = frozenset(), delay_s: float = 0.0) -> None:
        self.calls: list[list[int]] = []
        self.fail, self.delay_s = fail, delay_s

    async def __call__(self, items: list[int]) -> list[int]:
        self.calls.append(list(items))
        await asyncio.sleep(self.delay_s)
        if self.fail & set(items):
            raise ConnectionError(f"call of {items} failed")
        return [2 * item for item in items]


def test_calls_within_the_window_go_as_one_call_each_answered_with_its_own_result():
    send = Send()

    async def run():
        coalescer = Coalescer(send, window_s=0.05, max_items=64)
        return await asyncio.gather(*(coalescer(i) for i in range(5)))

    assert asyncio.run(run()) == [0, 2, 4, 6, 8]
    assert send.calls == [[0, 1, 2, 3, 4]]


def test_a_full_batch_goes_at_once_and_later_calls_open_the_next():
    send = Send()

    async def run():
        coalescer = Coalescer(send, window_s=10.0, max_items=2)  # the window never ends a batch here
        first = await asyncio.wait_for(asyncio.gather(coalescer(1), coalescer(2)), timeout=1)
        later = asyncio.gather(coalescer(3), coalescer(4), coalescer(5))
        done, _ = await asyncio.wait([later], timeout=0.2)
        return first, done

    first, done = asyncio.run(run())
    assert first == [2, 4] and not done  # 5 waits for its window, alone in its batch
    assert send.calls == [[1, 2], [3, 4]]


def test_calls_after_the_window_go_separately():
    send = Send()

    async def run():
        coalescer = Coalescer(send, window_s=0.0, max_items=64)
        together = await asyncio.gather(coalescer(1), coalescer(2))
        return together, await coalescer(3)

    assert asyncio.run(run()) == ([2, 4], 6)
    assert send.calls == [[1, 2], [3]]


def test_the_error_of_a_call_reaches_its_callers_and_no_one_else():
    send = Send(fail=frozenset({2}))

    async def run():
        coalescer = Coalescer(send, window_s=0.02, max_items=2)
        return await asyncio.gather(*(coalescer(i) for i in range(1, 5)), return_exceptions=True)

    one, two, three, four = asyncio.run(run())
    assert isinstance(one, ConnectionError) and one is two and "[1, 2]" in str(one)
    assert (three, four) == (6, 8)


def test_a_call_answering_another_number_of_results_fails_its_callers():
    async def short(items: list[int]) -> list[int]:
        return items[:1]

    async def run():
        coalescer = Coalescer(short, window_s=0.0, max_items=64)
        return await asyncio.gather(coalescer(1), coalescer(2), return_exceptions=True)

    errors = asyncio.run(run())
    assert all(isinstance(e, RuntimeError) and "of 2 items answered 1" in str(e) for e in errors)


def test_a_caller_cancelled_before_its_batch_is_sent_is_left_out():
    send = Send()

    async def run():
        coalescer = Coalescer(send, window_s=0.05, max_items=64)
        kept, dropped = asyncio.ensure_future(coalescer(1)), asyncio.ensure_future(coalescer(2))
        await asyncio.sleep(0)
        dropped.cancel()
        return await kept

    assert asyncio.run(run()) == 2
    assert send.calls == [[1]]


def test_options_are_checked():
    with pytest.raises(ValueError, match="window_s must be >= 0 and max_items >= 1"):
        Coalescer(Send(), window_s=-1, max_items=1)
    with pytest.raises(ValueError):
        Coalescer(Send(), window_s=0, max_items=0)


def test_one_coalescer_per_event_loop_and_key():
    def make() -> Coalescer:
        return Coalescer(Send(), 0.0, 8)

    async def made():
        return coalescer_for("k", make), coalescer_for("k", make), coalescer_for("other", make)

    first, again, other = asyncio.run(made())
    assert first is again and other is not first
    assert asyncio.run(made())[0] is not first  # another loop, another coalescer
