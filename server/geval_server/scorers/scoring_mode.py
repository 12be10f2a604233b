"""How a call asks the G-Eval scorers to read the score slot. Every scorer is handed
the call's mode; those that read no slot (SemScore, likelihood) ignore it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from geval_client.pb import reward_pb2


@dataclass(frozen=True)
class Logprobs:
    """The exact probability of every score label at the slot."""

    wire: ClassVar[int] = reward_pb2.SCORING_MODE_LOGPROBS


@dataclass(frozen=True)
class Sampling:
    """n sampled answers at a temperature; the score is their mean."""

    wire: ClassVar[int] = reward_pb2.SCORING_MODE_SAMPLING

    n: int = 20
    temperature: float = 1.0


@dataclass(frozen=True)
class Reasoning:
    """The judge writes its evaluation first (greedy at temperature 0), then the labels'
    exact probabilities are read at the slot after it."""

    wire: ClassVar[int] = reward_pb2.SCORING_MODE_REASONING

    max_tokens: int = 256  # the rationale's default budget
    temperature: float = 0.0


ScoringMode = Logprobs | Sampling | Reasoning
