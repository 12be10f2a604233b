"""Which data-parallel rank reads a request, so that a group's reads share one prefix cache.

With vLLM's data parallel (`--data-parallel-size`) one server drives several engine ranks,
each with its own prefix cache, and vLLM places each request on the least loaded rank
whatever its prefix: a GRPO group's completions, spread over the ranks, computed the group's
prompt once per rank (a GRPO call's prefix-cache hit rate fell from 81.9% to 76.3% at two
ranks). So every read of an item carries an affinity key, the item's prompt, and goes to the
rank a stable hash of it names: every rubric's read of every completion of a group, plain and
bounded, lands on one rank, in every call and after a restart. A read without a key (a
rubric's steps written once) is left to vLLM's balancer.
"""

from __future__ import annotations

import hashlib
from typing import Any


def routed_ranks(parallel_config: Any) -> int:
    """The ranks this server's engine client places requests on (vLLM's ParallelConfig):
    every rank; with hybrid load balancing this node's; one with external load balancing,
    where each server drives a single rank and vLLM ignores the rank asked for."""
    if parallel_config.data_parallel_external_lb:
        return 1
    if parallel_config.data_parallel_hybrid_lb:
        return parallel_config.data_parallel_size_local
    return parallel_config.data_parallel_size


def rank_for(affinity: str | None, ranks: int) -> int | None:
    """The rank that reads requests keyed `affinity` (vLLM's `data_parallel_rank`, an index
    among the routed ranks); None, vLLM's own choice, without a key or with one rank.
    blake2b, not Python's hash(), which is salted per process."""
    if affinity is None or ranks < 2:
        return None
    digest = hashlib.blake2b(affinity.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % ranks
