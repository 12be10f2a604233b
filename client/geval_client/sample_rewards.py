"""Scoring for trainers that need a number for every sample (OpenRLHF, veRL).

These frameworks call a reward per sample or per batch and put what it returns
straight into their advantage: there is no None to leave a sample out. So a
completion the server cannot score because of the completion gets `on_error`
("min", 0.0, by default, or a float), and any other failure (a missing
reference, a prompt over the judge's context, a judge error) raises
ItemNotScored naming the cause: a made-up number would train on it.

A SampleScorer is a few plain values, so it pickles (veRL ships reward
functions to Ray workers, OpenRLHF to its vLLM engine actors); it connects on
first use, one client per process (per event loop for the async form), shared
by every scorer with the same server. Unset options come from the environment:
GEVAL_REWARD_SERVER, GEVAL_REWARD_RUBRICS ("a,b" or "a:1,b:2"),
GEVAL_REWARD_ON_ERROR, GEVAL_REWARD_REASONING_TOKENS (reasoning mode with that
budget) and GEVAL_REWARD_AUTH_TOKEN.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .client import DEFAULT_TARGET, AsyncRewardClient, RewardClient
from .failures import MIN, OnError, parse_on_error, sample_reward
from .pb import reward_pb2
from .requests import Prompt, Rubrics, make_item
from .transport import read_token

SERVER_ENV, RUBRICS_ENV, ON_ERROR_ENV = "GEVAL_REWARD_SERVER", "GEVAL_REWARD_RUBRICS", "GEVAL_REWARD_ON_ERROR"
REASONING_ENV = "GEVAL_REWARD_REASONING_TOKENS"


@dataclass(frozen=True)
class Sample:
    prompt: Prompt  # what the judge reads as the input: text or chat messages
    completion: str
    reference: str | None = None
    rubrics: Sequence[reward_pb2.RubricSelection] = ()  # this sample's own (row_rubrics); empty: the scorer's
    rubrics_origin: str | None = None  # where its own rubrics came from, named in errors


@dataclass(frozen=True)
class SampleReward:
    reward: float
    failed: bool  # the server could not score the completion; reward is on_error
    label_mass: float  # mean over the rubrics; 0.0 when failed
    score_claims_removed: int


@dataclass(frozen=True)
class SampleScorer:
    server: str
    rubrics: Rubrics  # as RewardClient.score takes them; None: the server's default rubric
    on_error: float
    timeout: float
    token: str | None
    reasoning_tokens: int | None = None  # reasoning mode with this budget; None: log-probabilities

    @classmethod
    def configure(
        cls,
        server: str | None = None,
        rubrics: Rubrics = None,
        on_error: OnError | None = None,
        timeout: float = 300.0,
        token: str | None = None,
        reasoning_tokens: int | None = None,
    ) -> SampleScorer:
        """Each option left None is read from its environment variable, then defaulted."""
        if on_error is None:
            on_error = os.environ.get(ON_ERROR_ENV, MIN)
            on_error = on_error if on_error in ("min", "exclude") else _number(on_error, ON_ERROR_ENV)
        return cls(
            server=server or os.environ.get(SERVER_ENV) or DEFAULT_TARGET,
            rubrics=rubrics if rubrics is not None else rubrics_from_text(os.environ.get(RUBRICS_ENV, "")) or None,
            on_error=parse_on_error(on_error, can_exclude=False),
            timeout=timeout,
            token=token if token is not None else read_token(None),
            reasoning_tokens=reasoning_tokens if reasoning_tokens is not None else _reasoning_from_environment(),
        )

    def score(self, samples: Sequence[Sample]) -> list[SampleReward]:
        client = _sync_client(self.server, self.timeout, self.token)
        items = self._items(samples)
        return self._rewards(samples, client.score(items, self.rubrics, reasoning_tokens=self.reasoning_tokens))

    async def score_async(self, samples: Sequence[Sample]) -> list[SampleReward]:
        client = _async_client(self.server, self.timeout, self.token)
        items = self._items(samples)
        return self._rewards(samples, await client.score(items, self.rubrics, reasoning_tokens=self.reasoning_tokens))

    @staticmethod
    def _items(samples: Sequence[Sample]) -> list[reward_pb2.Item]:
        """One request; a sample that chose its own rubrics carries them (they replace the request's)."""
        items = []
        for i, sample in enumerate(samples):
            items.append(make_item(sample.prompt, sample.completion, sample.reference, str(i)))
            items[-1].rubrics.extend(sample.rubrics)
        return items

    def _rewards(self, samples: Sequence[Sample], results: Sequence[reward_pb2.ItemResult]) -> list[SampleReward]:
        rewards = []
        for sample, result in zip(samples, results):
            failed = result.HasField("error")
            rewards.append(SampleReward(
                reward=sample_reward(result, self.on_error, sample.rubrics_origin),
                failed=failed,
                label_mass=0.0 if failed or not result.scores else _mean(s.label_mass for s in result.scores),
                score_claims_removed=result.score_claims_removed,
            ))
        return rewards


def rubrics_from_text(text: str) -> dict[str, float]:
    """"a,b" or "a:1,b:2" (an environment variable, a command line) -> {name: weight}."""
    rubrics = {}
    for part in (part.strip() for part in text.split(",")):
        if part:
            name, sep, weight = part.rpartition(":") if ":" in part else (part, "", "")
            rubrics[name] = _number(weight, "rubric weight") if sep else 1.0
    return rubrics


def reference_text(value: Any) -> str | None:
    """A reference is non-empty text; anything else (None, numbers, lists) is none."""
    return value if isinstance(value, str) and value.strip() else None


def _reasoning_from_environment() -> int | None:
    text = os.environ.get(REASONING_ENV, "").strip()
    if not text:
        return None
    if not text.isdecimal():
        raise ValueError(f"{REASONING_ENV}: expected a number of tokens, got {text!r}")
    return int(text)


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{what}: expected a number, got {text!r}") from None


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


_sync_clients: dict[tuple, RewardClient] = {}
_sync_lock = threading.Lock()
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, AsyncRewardClient]] = (
    weakref.WeakKeyDictionary()
)


def _sync_client(server: str, timeout: float, token: str | None) -> RewardClient:
    """One blocking client per server in this process; gRPC channels are thread-safe."""
    key = (server, timeout, token)
    with _sync_lock:
        if key not in _sync_clients:
            _sync_clients[key] = RewardClient(server, timeout, token=token)
        return _sync_clients[key]


def _async_client(server: str, timeout: float, token: str | None) -> AsyncRewardClient:
    """One asyncio client per server and event loop: an asyncio channel belongs to its loop."""
    clients = _async_clients.setdefault(asyncio.get_running_loop(), {})
    key = (server, timeout, token)
    if key not in clients:
        clients[key] = AsyncRewardClient(server, timeout, token=token)
    return clients[key]
