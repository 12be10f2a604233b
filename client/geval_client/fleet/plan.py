"""Which replica of a fleet scores which items: pure planning, no I/O.

Items that share a prompt and reference (a GRPO group, or one prompt read with several
rubrics) go to one replica, so its prefix cache computes the prompt once; the same prompt
goes to the same replica across calls. The replica is chosen by rendezvous hashing over the
ready replicas (each prompt ranks every replica by a hash of both; the first has it), so a
replica joining or leaving moves only the prompts it gains or held. Load is bounded: no
replica takes more than `LOAD_FACTOR` times its fair share of a call's items while another
has room, so a prompt that hashes where others did spills to its next-ranked replica. A prompt
that fits nowhere goes whole to the least loaded of its ranking; in Score, one with at least
2 x `MIN_PIECE` items (a hot prompt) is cut into equal pieces of `MIN_PIECE` or more, each to
the least loaded of its ranking, since each piece costs one more read of the prompt but an idle replica costs more.
A ScoreGroups group is never cut.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from ..pb import reward_pb2

# Headroom over the fair share. Small, because a step ends when its busiest replica does:
# at 1.1 a step of 64 prompts x 8 completions over 8 replicas puts at most 8 prompts on any.
LOAD_FACTOR = 1.1
MIN_PIECE = 16


def affinity_key(entry: reward_pb2.Item | reward_pb2.Group) -> bytes:
    """What a replica's prefix cache can share between entries: the prompt and reference."""
    digest = hashlib.blake2b(digest_size=16)
    if entry.WhichOneof("prompt") == "chat":
        for message in entry.chat.messages:
            digest.update(b"\x01" + message.role.encode() + b"\x00" + message.content.encode())
    else:
        digest.update(b"\x02" + entry.text.encode())
    if entry.HasField("reference"):
        digest.update(b"\x03" + entry.reference.encode())
    return digest.digest()


def ranking(key: bytes, replicas: Sequence[str]) -> list[str]:
    """The replicas in this key's order of preference (rendezvous hashing)."""
    def weight(replica: str) -> bytes:
        return hashlib.blake2b(key + replica.encode(), digest_size=8).digest()

    return sorted(replicas, key=weight, reverse=True)


def plan(keys: Sequence[bytes], replicas: Sequence[str], *, cut: bool, load_factor: float = LOAD_FACTOR
         ) -> dict[str, list[int]]:
    """Entry indexes per replica, each replica's in request order. keys: one per entry;
    replicas: the ready ones. cut: whether a prompt's entries may be cut over replicas
    (Score's items may; ScoreGroups' groups, one entry per group, are never cut anyway)."""
    if not replicas:
        raise ValueError("no ready replica to plan for")
    together: dict[bytes, list[int]] = {}
    for index, key in enumerate(keys):
        together.setdefault(key, []).append(index)
    capacity = max(1, math.ceil(load_factor * len(keys) / len(replicas)))
    load = dict.fromkeys(replicas, 0)
    placed: dict[str, list[int]] = {replica: [] for replica in replicas}

    def put(replica: str, indexes: list[int]) -> None:
        placed[replica].extend(indexes)
        load[replica] += len(indexes)

    for key, indexes in together.items():
        order = ranking(key, replicas)
        fits = next((r for r in order if load[r] + len(indexes) <= capacity), None)
        if fits is not None:
            put(fits, indexes)
        elif not cut or len(indexes) < 2 * MIN_PIECE:
            put(min(order, key=load.__getitem__), indexes)
        else:
            size = math.ceil(len(indexes) / min(len(replicas), len(indexes) // MIN_PIECE))
            for start in range(0, len(indexes), size):
                put(min(order, key=load.__getitem__), indexes[start:start + size])
    return {replica: sorted(indexes) for replica, indexes in placed.items() if indexes}
