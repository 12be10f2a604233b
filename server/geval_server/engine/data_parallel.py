"""Which data-parallel rank reads a request, so that a group's reads share one prefix cache.

With vLLM's data parallel (`--data-parallel-size`) one server drives several engine ranks,
each with its own prefix cache, and vLLM places each request on the least loaded rank
whatever its prefix: a GRPO group's completions, spread over the ranks, computed the group's
prompt once per rank (a GRPO call's prefix-cache hit rate fell from 81.9% to 76.3% at two
ranks). So every read of an item carries an affinity key, the item's prompt, and the
server picks its rank itself: a key's first read goes to the rank with the fewest reads in
flight (the fewest keys, among equals), and every later read of it to the same rank while
the key is remembered. Every rubric's read of every completion of a group, plain and
bounded, lands on one rank, in every call of a run; and a call of a few groups is spread
over the ranks, where a hash of the key had put all 8 groups of one call on one rank of two.
A read without a key (a rubric's steps written once) is left to vLLM's balancer.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

REMEMBERED_KEYS = 65_536  # prompts whose rank is kept: a run's recent steps (a few MB of keys)


def routed_ranks(parallel_config: Any) -> int:
    """The ranks this server's engine client places requests on (vLLM's ParallelConfig):
    every rank; with hybrid load balancing this node's; one with external load balancing,
    where each server drives a single rank and vLLM ignores the rank asked for."""
    if parallel_config.data_parallel_external_lb:
        return 1
    if parallel_config.data_parallel_hybrid_lb:
        return parallel_config.data_parallel_size_local
    return parallel_config.data_parallel_size


class RankRouter:
    """Which rank reads each request (vLLM's `data_parallel_rank`): `take` before a request,
    `give_back` when it ends."""

    def __init__(self, ranks: int, remembered: int = REMEMBERED_KEYS) -> None:
        self.ranks = ranks
        self._remembered = remembered
        self._in_flight = [0] * ranks
        self._keys = [0] * ranks  # keys remembered on each rank
        self._rank_of: OrderedDict[str, int] = OrderedDict()

    def take(self, affinity: str | None) -> int | None:
        """The rank for a request keyed `affinity`; None (vLLM's own choice) without a key or
        with one rank."""
        if affinity is None or self.ranks < 2:
            return None
        rank = self._rank_of.get(affinity)
        if rank is None:
            rank = min(range(self.ranks), key=lambda r: (self._in_flight[r], self._keys[r]))
            self._keys[rank] += 1
            if len(self._rank_of) >= self._remembered:
                self._keys[self._rank_of.popitem(last=False)[1]] -= 1
        self._rank_of[affinity] = rank
        self._rank_of.move_to_end(affinity)
        self._in_flight[rank] += 1
        return rank

    def give_back(self, rank: int | None) -> None:
        if rank is not None:
            self._in_flight[rank] -= 1
