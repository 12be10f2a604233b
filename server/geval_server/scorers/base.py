"""What every way of scoring an item shares.

A scorer is served under a name and chosen like a rubric. The judge turns each
(item, scorer) into a request with `Scorer.request`, scores each distinct request
once with `Scorer.score` (all of a scorer's requests in one call, so it can batch
them), and aggregates; it never needs to know which scorer is which.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..prompts import JudgeInput
from ..reasoning import REASONING_TOKENS
from ..scoring import ScoreEstimate


class Kind(enum.Enum):
    GEVAL = "geval"  # the judge's probabilities of the score labels at the score slot
    SEMSCORE = "semscore"  # cosine of sentence embeddings of completion and reference
    LIKELIHOOD = "likelihood"  # the judge's mean token log-probability of the completion (GPTScore)


class Mode(enum.Enum):
    """How a G-Eval scorer reads the score slot."""

    LOGPROBS = "logprobs"
    SAMPLING = "sampling"
    REASONING = "reasoning"  # the judge writes its evaluation, then the slot is read after it


@dataclass(frozen=True)
class Sampling:
    n: int = 20
    temperature: float = 1.0


@dataclass(frozen=True)
class Reasoning:
    max_tokens: int = REASONING_TOKENS
    temperature: float = 0.0  # greedy


@dataclass(frozen=True)
class ScoreOptions:
    """Per call; scorers that read no score slot ignore them."""

    mode: Mode = Mode.LOGPROBS
    sampling: Sampling = Sampling()
    reasoning: Reasoning = Reasoning()


class ItemFailure(Exception):
    """One item (or one of its scorers) could not be scored; the batch goes on.
    code is a gRPC status name; field names the offending field, e.g. items[3].completion."""

    def __init__(self, code: str, message: str, field: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field


@dataclass(frozen=True)
class Score:
    """One scorer's verdict on one request."""

    estimate: ScoreEstimate
    mode: Mode | None = None  # how a score slot was read; None for scorers without one
    rationale: str = ""  # reasoning mode: the judge's evaluation before the slot
    # Likelihood scorers: mean log-probability of the tokens read, and how many; 0 for others.
    mean_logprob: float = 0.0
    tokens_read: int = 0


@dataclass(frozen=True)
class ScorerInfo:
    """What GetInfo tells about a scorer, so a reward can be traced to what produced it."""

    name: str
    kind: Kind
    criterion: str
    evaluation_criteria: str
    min_score: float
    max_score: float
    higher_is_better: bool
    uses_reference: bool
    content_hash: str
    task_introduction: str = ""
    evaluation_steps: str = ""
    steps_generated: bool = False
    labels: tuple[str, ...] = ()


class Scorer(Protocol):
    name: str
    kind: Kind
    needs_reference: bool
    # The completion reaches this scorer with score claims (`Coherence: 5`) blanked.
    blank_score_claims: bool
    content_hash: str

    def request(self, item: JudgeInput, where: str) -> Hashable:
        """What scoring `item` takes; equal requests are scored once. `where` names the
        item in errors (`items[3]`). Raises ItemFailure when the item cannot be scored."""

    async def score(self, requests: Sequence[Hashable], options: ScoreOptions) -> list[Score | BaseException]:
        """One result per request, in order; an exception fails the items that sent it."""

    def info(self) -> ScorerInfo: ...
