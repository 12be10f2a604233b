"""The scoring core every trainer adapter wraps: where the server is and how to score
(Scorer), its connection, the requests of one call and one reward per sample back.

A Scorer is a few plain values, so it pickles and deep-copies (TRL's async rollout worker,
Ray and veRL ship reward functions to other processes). It connects on first use: one
blocking client per process and one asyncio client per event loop (an asyncio channel
belongs to the loop it was opened in), shared by every Scorer with the same connection
options, so veRL's forms, which make a Scorer per call, reuse one channel. A process forked
after its parent connected (a process pool's worker: AReaL's AsyncRewardWrapper, veRL's prime)
opens its own: a gRPC channel must not be used across a fork.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ...client import AsyncRewardClient, RewardClient
from ...defaults import DEFAULT_TIMEOUT_S
from ...pb.reward_pb2 import Item, RubricSelection
from ...requests import Prompt, Rubric, Rubrics, check_group_options, make_item
from ...retry import RetryPolicy
from ...transport import Targets, TLSOptions, channel_spec
from ...types import (
    CompletionResult,
    GroupResult,
    ItemResult,
    Logprobs,
    ProcessRewardScore,
    ScoringMode,
    label_mass,
)
from .failures import MIN_REWARD
from .row_rubrics import rubric_error

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
    reward: float | None  # None: not scored (see unscored), or on_error "exclude"
    failed: bool  # the server could not score the completion
    # Mean over the rubrics of the judge's probability on valid labels (groupwise: on the verdicts
    # A and B, the group's); 0.0 when failed or nothing was read (a group of one).
    label_mass: float
    score_claims_removed: int
    rubric_rewards: dict[str, float] = field(default_factory=dict)  # rubric name -> its reward; {} when failed
    unscored: str | None = None  # why the server could not score it, where the completion did not cause it
    # What the bounded second read took off the reward (plain_reward - reward): above 0, a claim
    # or a numeral in the completion swayed the judge's plain read upwards.
    bound_gap: float = 0.0
    # A process reward's steps (the item's process-reward rubric): each step's score and its
    # [start, end) in the completion, in characters; () without one, or when not scored.
    step_scores: tuple[float, ...] = ()
    step_spans: tuple[tuple[int, int], ...] = ()


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


_clients: dict[tuple, RewardClient] = {}
_clients_lock = threading.Lock()
_loop_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, AsyncRewardClient]] = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True)
class Scorer:
    """server, timeout, retry, tls, token: as RewardClient's. rubrics: as RewardClient.score
    takes them (None: the server's default rubric). on_error: the reward of a completion that
    caused its own failure (failures.py); None leaves it out. mode: how G-Eval rubrics read the
    score slot. gate: a rule checked first ("math-equal", or a rule dict): a completion that fails
    it gets gate_reward (None: the server's 0.0) and the judge does not read it. steps: how process
    rewards split and reduce, {"delimiter": ..., "reduction": ...} (None: the server's defaults),
    kept as sorted (key, value) pairs so that a Scorer hashes (verifiers keeps a coalescer per
    Scorer)."""

    server: Targets
    rubrics: Rubrics = None
    on_error: float | None = MIN_REWARD
    mode: ScoringMode = Logprobs()
    timeout: float = DEFAULT_TIMEOUT_S
    retry: RetryPolicy = RetryPolicy()
    tls: TLSOptions | None = None
    token: str | None = None
    gate: Rubric | None = None
    gate_reward: float | None = None
    steps: Mapping[str, str] | tuple[tuple[str, str], ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.server, str):  # a list of addresses, hashable as the clients' key
            object.__setattr__(self, "server", tuple(self.server))
        if self.steps is not None:
            object.__setattr__(self, "steps", tuple(sorted(dict(self.steps).items())))

    @property
    def label(self) -> str:
        """The server as errors name it; reading it checks the address and the TLS files."""
        return channel_spec(self.server, self.tls, self.retry).label

    @property
    def _steps(self) -> dict[str, str] | None:
        return None if self.steps is None else dict(self.steps)

    @property
    def _connection(self) -> tuple:
        return self.server, self.timeout, self.retry, self.tls, self.token

    def client(self) -> RewardClient:
        """This process's blocking client; gRPC channels are thread-safe. Keyed by the process id
        as well, so a forked child never calls through its parent's channel; the entries it
        inherited stay there unused, never closed by the child."""
        key = (os.getpid(), *self._connection)
        with _clients_lock:
            if key not in _clients:
                _clients[key] = RewardClient(
                    self.server, self.timeout, retry=self.retry, tls=self.tls, token=self.token
                )
            return _clients[key]

    def async_client(self) -> AsyncRewardClient:
        """The running event loop's asyncio client."""
        clients = _loop_clients.setdefault(asyncio.get_running_loop(), {})
        if self._connection not in clients:
            clients[self._connection] = AsyncRewardClient(
                self.server, self.timeout, retry=self.retry, tls=self.tls, token=self.token
            )
        return clients[self._connection]

    def close(self) -> None:
        """Closes this process's blocking client; the next call opens another."""
        with _clients_lock:
            client = _clients.pop((os.getpid(), *self._connection), None)
        if client is not None:
            client.close()

    async def aclose(self) -> None:
        """Closes the running event loop's asyncio client; the next call opens another."""
        client = _loop_clients.get(asyncio.get_running_loop(), {}).pop(self._connection, None)
        if client is not None:
            await client.close()

    def score(self, items: Sequence[Item]) -> list[ItemResult]:
        return self.client().score(items, self.rubrics, self.mode, self.gate, self.gate_reward, self._steps)

    async def score_async(self, items: Sequence[Item]) -> list[ItemResult]:
        return await self.async_client().score(items, self.rubrics, self.mode, self.gate, self.gate_reward,
                                               self._steps)

    def score_groups(
        self, samples: Sequence[Sample], groups: Sequence[Sequence[int]], groupwise: Groupwise
    ) -> list[GroupResult]:
        """One ScoreGroups call; groups hold indices into samples, each of one prompt and reference
        (groups.py); no call for no groups."""
        if not groups:
            return []
        return self.client().score_groups(
            _wire(samples, groups), self.rubrics, groupwise.schedule, aggregation=groupwise.aggregation,
            gate=self.gate, gate_reward=self.gate_reward, steps=self._steps,
        )

    async def score_groups_async(
        self, samples: Sequence[Sample], groups: Sequence[Sequence[int]], groupwise: Groupwise
    ) -> list[GroupResult]:
        if not groups:
            return []
        return await self.async_client().score_groups(
            _wire(samples, groups), self.rubrics, groupwise.schedule, aggregation=groupwise.aggregation,
            gate=self.gate, gate_reward=self.gate_reward, steps=self._steps,
        )

    def item_rewards(self, samples: Sequence[Sample], results: Sequence[ItemResult]) -> list[SampleReward]:
        """One reward per sample, from the results of score(items_of(samples))."""
        return [
            _with_steps(self._reward(result, label_mass(result) or 0.0, {s.rubric: s.reward for s in result.scores},
                                     sample.rubrics_origin), result)
            for sample, result in zip(samples, results)
        ]

    def group_rewards(
        self, groups: Sequence[Sequence[int]], results: Sequence[GroupResult], size: int
    ) -> list[SampleReward]:
        """One reward per sample of a score_groups call, in the samples' order. A group of one gets
        the server's 0.5 (compared with nobody)."""
        by_index = {i: reward for group, result in zip(groups, results)
                    for i, reward in zip(group, self._members(result, len(group)))}
        return [by_index[i] for i in range(size)]

    def _members(self, result: GroupResult, size: int) -> list[SampleReward]:
        if not result.ok and result.error.caused_by_completion:
            # The server's request check fails a whole group for one member over --max-field-chars: that
            # member gets on_error, the others were compared with nobody and get what a group of one gets.
            return [SampleReward(self.on_error, True, 0.0, 0) if k == result.error.member
                    else SampleReward(NEUTRAL, False, 0.0, 0) for k in range(size)]
        if not result.ok:
            why = "the reward server could not judge a group, and not because of a completion: " + result.error.message
            return [SampleReward(None, True, 0.0, 0, unscored=why)] * size
        masses = [r.label_mass for r in result.rubrics if r.label_mass is not None]
        mass = sum(masses) / len(masses) if masses else 0.0  # verdict mass; none where nothing was compared
        return [self._reward(completion, mass, {r.rubric: r.rewards[k] for r in result.rubrics})
                for k, completion in enumerate(result.completions)]

    def _reward(
        self, result: ItemResult | CompletionResult, mass: float, rubric_rewards: dict[str, float],
        rubrics_origin: str | None = None,
    ) -> SampleReward:
        if result.ok:
            gap = max(0.0, getattr(result, "plain_reward", result.reward) - result.reward)  # groups: not reported
            return SampleReward(result.reward, False, mass, result.score_claims_removed, rubric_rewards, bound_gap=gap)
        if result.error.caused_by_completion:
            return SampleReward(self.on_error, True, 0.0, result.score_claims_removed)
        why = "the reward server could not score an item, and not because of its completion: " + rubric_error(
            result.error, rubrics_origin)
        return SampleReward(None, True, 0.0, result.score_claims_removed, unscored=why)


def _with_steps(reward: SampleReward, result: ItemResult) -> SampleReward:
    """The reward with its item's process-reward steps, where it has one; an item scored by
    several process rewards keeps none (no one set of steps is the item's)."""
    steps = [s for s in result.scores if isinstance(s, ProcessRewardScore)]
    if len(steps) != 1:
        return reward
    return replace(reward, step_scores=tuple(steps[0].step_scores), step_spans=tuple(steps[0].step_spans))


def items_of(samples: Sequence[Sample]) -> list[Item]:
    """One Score request's items; a sample that chose its own rubrics carries them (they replace the request's)."""
    made = []
    for i, sample in enumerate(samples):
        made.append(make_item(sample.prompt, sample.completion, sample.reference, str(i)))
        made[-1].rubrics.extend(sample.rubrics)
    return made


def _wire(samples: Sequence[Sample], groups: Sequence[Sequence[int]]) -> list[dict]:
    return [{"prompt": samples[g[0]].prompt, "completions": [samples[i].completion for i in g],
             "reference": samples[g[0]].reference} for g in groups]
