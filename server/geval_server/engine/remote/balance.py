"""Which remote reads a request: a prompt's reads on one remote, for its prefix cache.

Each remote has a prefix cache of its own, so a GRPO group's completions spread over two
remotes would compute the group's prompt on both. As with data-parallel ranks in process
(data_parallel.py), a read carries an affinity key (the item's or group's prompt): its first
read goes to the remote with the fewest requests in flight, and every later read of the key
to the same remote while it is up and the key remembered. A remote that is down is passed
over, and a key it held moves to the remote its next read goes to. Pure: no I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

REMEMBERED_KEYS = 65_536  # prompts whose remote is kept: a run's recent steps (a few MB of keys)


class NoRemoteUp(RuntimeError):
    """Every remote is down."""


class Spread:
    """`take` a remote before a request, `give_back` when it ends."""

    def __init__(self, remotes: int, remembered: int = REMEMBERED_KEYS) -> None:
        self.in_flight = [0] * remotes
        self._remembered = remembered
        self._remote_of: OrderedDict[str, int] = OrderedDict()

    def take(self, affinity: str | None, up: Sequence[bool]) -> int:
        """The remote for a request keyed `affinity` (None: the least busy), among those up."""
        remote = self._remote_of.get(affinity) if affinity is not None else None
        if remote is None or not up[remote]:
            candidates = [r for r, is_up in enumerate(up) if is_up]
            if not candidates:
                raise NoRemoteUp("every remote judge server is down")
            remote = min(candidates, key=self.in_flight.__getitem__)
        if affinity is not None:
            self._remote_of[affinity] = remote
            self._remote_of.move_to_end(affinity)
            if len(self._remote_of) > self._remembered:
                self._remote_of.popitem(last=False)
        self.in_flight[remote] += 1
        return remote

    def give_back(self, remote: int) -> None:
        self.in_flight[remote] -= 1
