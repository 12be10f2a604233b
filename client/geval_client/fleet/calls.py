"""One Score or ScoreGroups call spread over a fleet: cut into one sub-call per replica as
fleet.plan() says, answered parts put back in the caller's order.

Entries whose sub-call failed are planned again (by the caller) over the replicas still up,
so every entry is answered exactly once, by one replica. An entry without an id is sent
with its index in the whole call, so results carry the ids one server would have given.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..pb import reward_pb2
from .plan import affinity_key, plan
from .replicas import MixedFleet

# method -> (the request's repeated field of entries, whether a prompt's entries may be cut)
SPLIT_METHODS = {"Score": ("items", True), "ScoreGroups": ("groups", False)}
_RESPONSES = {"Score": reward_pb2.ScoreResponse, "ScoreGroups": reward_pb2.ScoreGroupsResponse}


class Call:
    def __init__(self, method: str, request) -> None:
        self.method = method
        self._field, self._cut = SPLIT_METHODS[method]
        self._entries = getattr(request, self._field)
        self._keys = [affinity_key(entry) for entry in self._entries]
        self._shared = type(request)()  # everything but the entries, copied into each sub-call
        self._shared.CopyFrom(request)
        self._shared.ClearField(self._field)
        self._results: list = [None] * len(self._entries)
        self.pending: list[int] = list(range(len(self._entries)))
        self._judge_model = ""
        self._hashes: dict[str, tuple[str, str]] = {}  # rubric -> (content hash, replica that sent it)
        self.scored_by: dict[str, int] = {}  # replica -> entries it answered

    def parts(self, replicas: Sequence[str], entries: Sequence[int]) -> list[tuple[str, list[int], object]]:
        """(replica, entry indexes, sub-request) placing `entries` (indexes) over `replicas`."""
        placed = plan([self._keys[i] for i in entries], replicas, cut=self._cut)
        parts = []
        for replica, positions in placed.items():
            indexes = [entries[p] for p in positions]
            parts.append((replica, indexes, self._sub_request(indexes)))
        return parts

    def answered(self, replica: str, indexes: list[int], response) -> None:
        if len(response.results) != len(indexes):
            raise RuntimeError(
                f"replica {replica} answered {len(response.results)} results for {len(indexes)} entries"
            )
        if self.method == "Score":
            self._check_hashes(replica, response)
        for index, result in zip(indexes, response.results):
            self._results[index] = result
        done = set(indexes)
        self.pending = [i for i in self.pending if i not in done]
        self._judge_model = self._judge_model or response.judge_model
        self.scored_by[replica] = self.scored_by.get(replica, 0) + len(indexes)

    def response(self):
        if self.pending:
            raise RuntimeError(f"{len(self.pending)} entries of the call were never answered")
        return _RESPONSES[self.method](results=self._results, judge_model=self._judge_model)

    def _sub_request(self, indexes: list[int]):
        request = type(self._shared)()
        request.CopyFrom(self._shared)
        entries = getattr(request, self._field)
        entries.extend(self._entries[i] for i in indexes)
        for entry, index in zip(entries, indexes):
            if not entry.id:
                entry.id = str(index)
        return request

    def _check_hashes(self, replica: str, response: reward_pb2.ScoreResponse) -> None:
        """A rubric sent with the call (not served) may have had its steps written by each
        replica: results of one rubric from two replicas must share its content hash."""
        for result in response.results:
            for score in result.scores:
                if not score.content_hash:
                    continue
                seen = self._hashes.setdefault(score.rubric, (score.content_hash, replica))
                if seen[0] != score.content_hash:
                    raise MixedFleet(
                        f"replica {replica} scored rubric {score.rubric!r} with content hash "
                        f"{score.content_hash[:12]}, {seen[1]} with {seen[0][:12]}: give the rubric its "
                        "evaluation_steps (prepare_rubrics returns them) so every replica reads the same"
                    )
