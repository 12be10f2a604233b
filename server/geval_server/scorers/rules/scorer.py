"""The rule scorers: a verifiable check of the completion, 1.0 when it passes and 0.0 when it
fails, with the reason in the score; no model is read, so a rule costs microseconds (or the
milliseconds of a math comparison) and can gate the judge (judge/judge.py). The checks
themselves are in checks.py; here they meet the scorer interface (scorers/base.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from geval_client.pb import reward_pb2

from geval_server.groupwise.comparer import PointwiseComparer
from geval_server.scorers.base import ItemFailure, JudgeInput, ScorerInfo
from geval_server.scorers.rules.checks import WORKERS, RuleError, RuleTimeout, Verdict
from geval_server.scorers.scoring_mode import ScoringMode

KIND = "rule"
POINTWISE = PointwiseComparer()  # in a group each member passes or fails on its own


@dataclass(frozen=True)
class RuleRequest:
    completion: str
    reference: str | None
    where: str  # the item's path (items[3]), so a rule that cannot run names the field


@dataclass(frozen=True)
class RuleScore:
    verdict: Verdict

    @property
    def reward(self) -> float:
        return 1.0 if self.verdict.passed else 0.0

    def wire(self) -> dict:
        verdict = self.verdict
        return {"rule": {"passed": verdict.passed, "reason": verdict.reason, "answer": verdict.answer}}


@dataclass(frozen=True)
class RuleDetails:
    rule: str  # math-equal, exact-match, regex, json
    description: str
    pattern: str = ""
    schema: str = ""

    def wire(self) -> dict:
        return {"kind": reward_pb2.SCORER_KIND_RULE, "rule": reward_pb2.RuleInfo(
            rule=self.rule, pattern=self.pattern, schema=self.schema, description=self.description)}


class RuleScorer:
    """One rule served under a name: `check(completion, reference)` gives its verdict."""

    kind: ClassVar[str] = KIND
    reads_score_slot: ClassVar[bool] = False  # a rule reads the completion as written
    can_gate: ClassVar[bool] = True
    comparer: ClassVar[PointwiseComparer] = POINTWISE

    def __init__(self, name: str, check: Callable[[str, str | None], Verdict], needs_reference: bool,
                 details: RuleDetails) -> None:
        self.name = name
        self.needs_reference = needs_reference
        self._check = check
        self._details = details
        blob = {"name": name, "rule": details.rule, "pattern": details.pattern, "schema": details.schema}
        self.content_hash = hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()

    def request(self, item: JudgeInput, where: str) -> RuleRequest:
        if self.needs_reference and not (item.reference or "").strip():
            raise ItemFailure("INVALID_ARGUMENT", f"rule {self.name!r} compares the final answer with the "
                              "item's reference: set it", f"{where}.reference")
        return RuleRequest(item.completion, item.reference, where)

    async def score(self, requests: Sequence[RuleRequest], mode: ScoringMode) -> list[RuleScore | ItemFailure]:
        """The requests checked in WORKERS threads, a contiguous share each, so a math comparison's
        wait on its bounded worker process never holds the event loop, and every worker process
        compares at once (one thread for a whole batch kept math-equal to one core: 519 items/s
        on a 2-core EPYC, benchmarks/bench_rules.py)."""
        share = -(-len(requests) // WORKERS)
        parts = await asyncio.gather(*(asyncio.to_thread(lambda part: [self._one(r) for r in part],
                                                         requests[i:i + share])
                                       for i in range(0, len(requests), share)))
        return [result for part in parts for result in part]

    def _one(self, request: RuleRequest) -> RuleScore | ItemFailure:
        try:
            return RuleScore(self._check(request.completion, request.reference))
        except RuleError as error:
            field = f"{request.where}.reference" if error.field == "reference" else request.where
            return ItemFailure("INVALID_ARGUMENT", f"rule {self.name!r}: {error.field}: {error.message}", field)
        except RuleTimeout as error:
            return ItemFailure("INVALID_ARGUMENT", f"rule {self.name!r}: {error}", f"{request.where}.completion")

    def info(self) -> ScorerInfo:
        return ScorerInfo(name=self.name, kind=self.kind, min_score=0.0, max_score=1.0, higher_is_better=True,
                          uses_reference=self.needs_reference, content_hash=self.content_hash, details=self._details)
