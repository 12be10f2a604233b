"""The prefix gate (prefix_gate.py): which reads wait for which, with a made-up engine."""

from __future__ import annotations

import asyncio

import pytest
from geval_server.prefix_gate import MIN_BLOCKS, PrefixGate

BLOCK = 4


def prompt(shared_blocks: int, own: int, *, base: int = 0) -> list[int]:
    """`shared_blocks` blocks every such prompt has, then a block of its own."""
    return [base + i for i in range(shared_blocks * BLOCK)] + [1000 + own] * BLOCK


async def run(prompts: list[list[int]], fail: set[int] = frozenset()) -> list[tuple[str, int]]:
    """Each prompt read through the gate at once; the order of engine starts and ends."""
    gate, events = PrefixGate(BLOCK), []

    async def read(index: int, ids: list[int]) -> None:
        hashes = gate.hashes(ids)
        await gate.wait(hashes)
        entered = gate.enter(hashes)
        events.append(("start", index))
        try:
            await asyncio.sleep(0.01)
            if index in fail:
                raise RuntimeError("the read failed")
            events.append(("end", index))
        finally:
            gate.leave(hashes, entered)

    await asyncio.gather(*(read(i, ids) for i, ids in enumerate(prompts)), return_exceptions=True)
    return events


def started_before_first_end(events: list[tuple[str, int]]) -> set[int]:
    first_end = next(i for i, (kind, _) in enumerate(events) if kind == "end" or i == len(events) - 1)
    return {index for kind, index in events[:first_end] if kind == "start"}


def test_reads_sharing_a_long_prefix_follow_the_first():
    events = asyncio.run(run([prompt(MIN_BLOCKS + 2, own) for own in range(8)]))
    assert started_before_first_end(events) == {0}
    assert {index for kind, index in events if kind == "end"} == set(range(8))


def test_reads_sharing_less_than_the_minimum_go_together():
    events = asyncio.run(run([prompt(MIN_BLOCKS - 1, own) for own in range(4)]))
    assert started_before_first_end(events) == {0, 1, 2, 3}


def test_reads_with_nothing_in_common_go_together():
    events = asyncio.run(run([prompt(MIN_BLOCKS + 2, 0, base=10_000 * group) for group in range(3)]))
    assert started_before_first_end(events) == {0, 1, 2}


def test_a_prefix_already_answered_is_not_waited_for():
    async def scenario() -> list[str]:
        gate, order = PrefixGate(BLOCK), []
        first = gate.hashes(prompt(MIN_BLOCKS + 2, 0))
        gate.leave(first, gate.enter(first))  # answered earlier: the shared blocks are in the cache
        held = gate.hashes(prompt(MIN_BLOCKS + 2, 1))
        entered = gate.enter(held)  # in flight, sharing only answered blocks with the next one
        await asyncio.wait_for(gate.wait(gate.hashes(prompt(MIN_BLOCKS + 2, 2))), timeout=1)
        order.append("went")
        gate.leave(held, entered)
        return order

    assert asyncio.run(scenario()) == ["went"]


def test_a_failed_read_lets_its_followers_go():
    events = asyncio.run(run([prompt(MIN_BLOCKS + 2, own) for own in range(3)], fail={0}))
    assert {index for kind, index in events if kind == "end"} == {1, 2}


@pytest.mark.parametrize("length", [0, BLOCK - 1, BLOCK, 3 * BLOCK + 1])
def test_only_whole_blocks_are_hashed(length):
    assert len(PrefixGate(BLOCK).hashes(list(range(length)))) == length // BLOCK
