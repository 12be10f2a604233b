"""The replicas of a fleet: who they are now, which may be called, and whether they agree.

The fleet's entries (a list of host:port, or one DNS name such as a Kubernetes headless
Service's) are resolved again every `resolve_every_s`, so new replicas are picked up and gone
ones dropped. A replica a call could not reach is set aside for `set_aside_s` and its work sent
to the others; after that it is tried again. A replica is called only once its rubrics were
compared with the fleet's (`compare_rubrics`): a fleet whose replicas would score the same item
differently is refused.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Mapping, Sequence

from ..pb import reward_pb2

RESOLVE_EVERY_S = 30.0
SET_ASIDE_S = 5.0


class MixedFleet(RuntimeError):
    """Replicas of one fleet serve different rubrics (or the same rubric differently)."""


class Replicas:
    def __init__(
        self,
        entries: Sequence[str],
        resolve: Callable[[str], list[str]],
        *,
        resolve_every_s: float = RESOLVE_EVERY_S,
        set_aside_s: float = SET_ASIDE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.entries = list(entries)
        self._resolve = resolve
        self._resolve_every_s = resolve_every_s
        self._set_aside_s = set_aside_s
        self._clock = clock
        self._addresses: dict[str, str] = {}  # address -> the entry (host name) it was resolved from
        self._resolved_at = -float("inf")
        self._aside_until: dict[str, float] = {}
        self.rubrics: dict[str, dict[str, str]] = {}  # address -> {rubric: content hash}, once compared

    def current(self) -> dict[str, str]:
        """address -> host, resolved again when stale; a name that fails to resolve keeps its
        last addresses (a DNS blip is not a fleet gone)."""
        now = self._clock()
        if now - self._resolved_at >= self._resolve_every_s:
            self._resolved_at = now
            fresh: dict[str, str] = {}
            for entry in self.entries:
                host = entry.rpartition(":")[0].strip("[]")
                try:
                    fresh.update(dict.fromkeys(self._resolve(entry), host))
                except OSError:  # socket.gaierror among them
                    fresh.update({address: h for address, h in self._addresses.items() if h == host})
            self._addresses = fresh
            for gone in set(self.rubrics) - set(fresh):
                del self.rubrics[gone]
        return dict(self._addresses)

    def unchecked(self) -> list[str]:
        """Replicas not set aside whose rubrics have not been compared yet."""
        return [address for address in self.current() if address not in self.rubrics and not self._aside(address)]

    def up(self) -> list[str]:
        """Compared replicas not set aside."""
        return [address for address in self.current() if address in self.rubrics and not self._aside(address)]

    def ready(self) -> list[str]:
        """Replicas to send work to: those up; if none is, every compared one (a call can only
        wait for one to come back)."""
        return self.up() or [address for address in self.current() if address in self.rubrics]

    def _aside(self, address: str) -> bool:
        return self._aside_until.get(address, 0.0) > self._clock()

    def set_aside(self, address: str) -> None:
        self._aside_until[address] = self._clock() + self._set_aside_s

    def answered(self, address: str) -> None:
        self._aside_until.pop(address, None)

    def add_compared(self, served: Mapping[str, dict[str, str]]) -> None:
        """Replicas' served rubrics ({address: {rubric: content hash}}) join the compared ones,
        or MixedFleet is raised naming the odd replica and rubric."""
        compare_rubrics({**self.rubrics, **served})
        self.rubrics.update(served)


def served_rubrics(info: reward_pb2.GetInfoResponse) -> dict[str, str]:
    return {rubric.name: rubric.content_hash for rubric in info.rubrics}


def compare_rubrics(served: Mapping[str, Mapping[str, str]]) -> None:
    """Raises MixedFleet unless every replica serves the same rubrics with the same content
    hashes. The odd replica is the one that differs from what most replicas serve."""
    if len(served) < 2:
        return
    fingerprints = {address: tuple(sorted(rubrics.items())) for address, rubrics in served.items()}
    counts = collections.Counter(fingerprints.values())
    common, _ = max(counts.items(), key=lambda pair: (pair[1], -_first(fingerprints, pair[0])))
    majority = dict(common)
    for address, rubrics in served.items():
        if fingerprints[address] == common:
            continue
        reference = next(a for a, f in fingerprints.items() if f == common)
        for name in sorted(set(majority) | set(rubrics)):
            if name not in rubrics:
                problem = f"does not serve rubric {name!r}, which {reference} serves"
            elif name not in majority:
                problem = f"serves rubric {name!r}, which {reference} does not"
            elif rubrics[name] != majority[name]:
                problem = (f"serves rubric {name!r} with content hash {rubrics[name][:12]}, "
                           f"{reference} with {majority[name][:12]}")
            else:
                continue
            raise MixedFleet(
                f"replica {address} {problem}: every replica of a fleet must serve the same rubrics, "
                "steps and judge (serve rubric files with evaluation_steps written, or share $GEVAL_REWARD_CACHE)"
            )


def _first(fingerprints: Mapping[str, tuple], fingerprint: tuple) -> int:
    """Position of the first replica with this fingerprint: ties go to the earliest listed."""
    return next(i for i, f in enumerate(fingerprints.values()) if f == fingerprint)
