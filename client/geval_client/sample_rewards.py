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
GEVAL_REWARD_ON_ERROR, GEVAL_REWARD_MODE ("logprobs", "sampling:N" or
"reasoning:MAX_TOKENS") and GEVAL_REWARD_AUTH_TOKEN.

score_groups is the groupwise form (ScoreGroups): the same contract, one reward per
sample, each judged against the other samples of its group.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .client import AsyncRewardClient, RewardClient
from .defaults import DEFAULT_TARGET, DEFAULT_TIMEOUT_S
from .errors import ItemNotScored
from .failures import MIN, OnError, parse_on_error, sample_reward
from .pb.reward_pb2 import Item, RubricSelection
from .requests import Prompt, Rubrics, check_group_options, make_item
from .retry import RetryPolicy
from .transport import read_token
from .types import GroupResult, ItemResult, Logprobs, Mode, label_mass, mode_from_text

SERVER_ENV, RUBRICS_ENV, ON_ERROR_ENV = "GEVAL_REWARD_SERVER", "GEVAL_REWARD_RUBRICS", "GEVAL_REWARD_ON_ERROR"
MODE_ENV = "GEVAL_REWARD_MODE"
NEUTRAL = 0.5  # the server's reward for a group member compared with nobody


@dataclass(frozen=True)
class Sample:
    prompt: Prompt  # what the judge reads as the input: text or chat messages
    completion: str
    reference: str | None = None
    rubrics: Sequence[RubricSelection] = ()  # this sample's own (row_rubrics); empty: the scorer's
    rubrics_origin: str | None = None  # where its own rubrics came from, named in errors


@dataclass(frozen=True)
class SampleReward:
    reward: float
    failed: bool  # the server could not score the completion; reward is on_error
    # Mean over the rubrics of the judge's probability on valid labels (groupwise: on the verdicts
    # A and B, the group's); 0.0 when failed or nothing was read (a group of one).
    label_mass: float
    score_claims_removed: int
    rubric_rewards: dict[str, float] = field(default_factory=dict)  # rubric name -> its reward; {} when failed


@dataclass(frozen=True)
class Groupwise:
    """How ScoreGroups judges each group. schedule: None (all pairs up to 8 completions,
    neighbours beyond), "all_pairs", "neighbours" or "anchor" (each completion against its
    reference); aggregation: "mean_win_probability" or "bradley_terry". Checked when made,
    so a bad option fails when the reward is configured, not on the first batch."""

    schedule: str | None = None
    aggregation: str = "mean_win_probability"

    def __post_init__(self) -> None:
        check_group_options(self.schedule, self.aggregation)


@dataclass(frozen=True)
class SampleScorer:
    server: str
    rubrics: Rubrics  # as RewardClient.score takes them; None: the server's default rubric
    on_error: float
    timeout: float
    token: str | None
    mode: Mode = Logprobs()  # how G-Eval rubrics read the score slot
    # How long to keep calling a server that is down or shedding load; None: RetryPolicy's default.
    # The OpenRLHF bridge sets it so that a whole answer comes before OpenRLHF's HTTP timeout.
    wait_for_server_s: float | None = None

    @classmethod
    def configure(
        cls,
        server: str | None = None,
        rubrics: Rubrics = None,
        on_error: OnError | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        token: str | None = None,
        mode: Mode | str | None = None,
        wait_for_server_s: float | None = None,
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
            mode=_mode(mode),
            wait_for_server_s=wait_for_server_s,
        )

    def score(self, samples: Sequence[Sample]) -> list[SampleReward]:
        client = _sync_client(self.server, self.timeout, self.token, self.wait_for_server_s)
        items = self._items(samples)
        return self._rewards(samples, client.score(items, self.rubrics, self.mode))

    async def score_async(self, samples: Sequence[Sample]) -> list[SampleReward]:
        client = _async_client(self.server, self.timeout, self.token, self.wait_for_server_s)
        items = self._items(samples)
        return self._rewards(samples, await client.score(items, self.rubrics, self.mode))

    def check_groupwise(self) -> None:
        """ScoreGroups reads the probabilities of the verdicts A and B; a mode for G-Eval's score
        slot would be silently ignored there, so it is refused."""
        if not isinstance(self.mode, Logprobs):
            raise ValueError(
                f"groupwise judging reads the verdict's probabilities; mode {self.mode!r} applies to pointwise "
                f"scoring only: leave mode (and {MODE_ENV}) unset"
            )

    def score_groups(
        self, samples: Sequence[Sample], groups: Sequence[Sequence[int]], groupwise: Groupwise
    ) -> list[SampleReward]:
        """One ScoreGroups call; groups hold indices into samples, each of one prompt and reference
        (groups.py). One reward per sample, in samples' order. A group of one gets the server's 0.5
        (compared with nobody); a member that failed because of its completion gets on_error; any
        other failure, of a member or of a whole group, raises ItemNotScored."""
        self.check_groupwise()
        for sample in samples:
            if sample.rubrics:
                raise ValueError(
                    f"{sample.rubrics_origin}: the sample has its own rubrics, but ScoreGroups judges a call "
                    "with one set of rubrics: give them in the options instead"
                )
        if not groups:
            return []
        wire = [{"prompt": samples[g[0]].prompt, "completions": [samples[i].completion for i in g],
                 "reference": samples[g[0]].reference} for g in groups]
        client = _sync_client(self.server, self.timeout, self.token, self.wait_for_server_s)
        results = client.score_groups(wire, self.rubrics, groupwise.schedule, aggregation=groupwise.aggregation)
        by_index = {i: reward for group, result in zip(groups, results)
                    for i, reward in zip(group, self._group_rewards(result, len(group)))}
        return [by_index[i] for i in range(len(samples))]

    def _group_rewards(self, result: GroupResult, size: int) -> list[SampleReward]:
        if not result.ok and result.error.caused_by_completion:
            # The server's request check fails a whole group for one member over --max-field-chars: that
            # member gets on_error, the others were compared with nobody and get what a group of one gets.
            return [SampleReward(reward=self.on_error if k == result.error.member else NEUTRAL,
                                 failed=k == result.error.member, label_mass=0.0, score_claims_removed=0)
                    for k in range(size)]
        if not result.ok:
            raise ItemNotScored(
                "the reward server could not judge a group, and not because of a completion: " + result.error.message
            )
        masses = [r.label_mass for r in result.rubrics if r.label_mass is not None]
        mass = sum(masses) / len(masses) if masses else 0.0  # verdict mass; none where nothing was compared
        return [
            SampleReward(
                reward=sample_reward(completion, self.on_error),
                failed=not completion.ok,
                label_mass=mass if completion.ok else 0.0,
                score_claims_removed=completion.score_claims_removed,
                rubric_rewards={r.rubric: r.rewards[k] for r in result.rubrics} if completion.ok else {},
            )
            for k, completion in enumerate(result.completions)
        ]

    @staticmethod
    def _items(samples: Sequence[Sample]) -> list[Item]:
        """One request; a sample that chose its own rubrics carries them (they replace the request's)."""
        items = []
        for i, sample in enumerate(samples):
            items.append(make_item(sample.prompt, sample.completion, sample.reference, str(i)))
            items[-1].rubrics.extend(sample.rubrics)
        return items

    def _rewards(self, samples: Sequence[Sample], results: Sequence[ItemResult]) -> list[SampleReward]:
        rewards = []
        for sample, result in zip(samples, results):
            rewards.append(SampleReward(
                reward=sample_reward(result, self.on_error, sample.rubrics_origin),
                failed=not result.ok,
                label_mass=(label_mass(result) or 0.0) if result.ok else 0.0,
                score_claims_removed=result.score_claims_removed,
                rubric_rewards={s.rubric: s.reward for s in result.scores} if result.ok else {},
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


def _mode(mode: Mode | str | None) -> Mode:
    """A mode given as an object or as text ("reasoning:256", as configs and the environment
    write it); unset: GEVAL_REWARD_MODE, else log-probabilities."""
    if mode is None:
        try:
            return mode_from_text(os.environ.get(MODE_ENV) or "logprobs")
        except ValueError as error:
            raise ValueError(f"{MODE_ENV}: {error}") from None
    return mode_from_text(mode) if isinstance(mode, str) else mode


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{what}: expected a number, got {text!r}") from None


_sync_clients: dict[tuple, RewardClient] = {}
_sync_lock = threading.Lock()
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, AsyncRewardClient]] = (
    weakref.WeakKeyDictionary()
)


def _sync_client(server: str, timeout: float, token: str | None, wait_s: float | None) -> RewardClient:
    """One blocking client per server in this process; gRPC channels are thread-safe."""
    key = (server, timeout, token, wait_s)
    with _sync_lock:
        if key not in _sync_clients:
            _sync_clients[key] = RewardClient(server, timeout, retry=_retry(wait_s), token=token)
        return _sync_clients[key]


def _async_client(server: str, timeout: float, token: str | None, wait_s: float | None) -> AsyncRewardClient:
    """One asyncio client per server and event loop: an asyncio channel belongs to its loop."""
    clients = _async_clients.setdefault(asyncio.get_running_loop(), {})
    key = (server, timeout, token, wait_s)
    if key not in clients:
        clients[key] = AsyncRewardClient(server, timeout, retry=_retry(wait_s), token=token)
    return clients[key]


def _retry(wait_for_server_s: float | None) -> RetryPolicy:
    return RetryPolicy() if wait_for_server_s is None else RetryPolicy(wait_for_server_s=wait_for_server_s)
