"""Scoring for trainers that need a number for every sample (OpenRLHF, veRL).

These frameworks call a reward per sample or per batch and put what it returns
straight into their advantage: there is no None to leave a sample out. So a
completion the server cannot score because of the completion gets `on_error`
("min", 0.0, by default, or a float), and any other failure (a missing
reference, a prompt over the judge's context, a judge error) raises
ItemNotScored naming the cause: a made-up number would train on it.

A SampleScorer is a Scorer (scoring.py): it pickles (veRL ships reward functions
to Ray workers, OpenRLHF to its vLLM engine actors) and connects on first use.
Unset options come from the environment: GEVAL_REWARD_SERVER, GEVAL_REWARD_RUBRICS
("a,b" or "a:1,b:2"), GEVAL_REWARD_ON_ERROR, GEVAL_REWARD_MODE ("logprobs",
"sampling:N" or "reasoning:MAX_TOKENS"), GEVAL_REWARD_AUTH_TOKEN, GEVAL_REWARD_GATE and
GEVAL_REWARD_GATE_REWARD, and for process rewards GEVAL_REWARD_STEP_DELIMITER and
GEVAL_REWARD_STEP_REDUCTION.

groupwise_rewards (and groupwise_rewards_async) is the groupwise form (ScoreGroups): the
same contract, one reward per sample, each judged against the other samples of its group.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ...defaults import DEFAULT_TARGET, DEFAULT_TIMEOUT_S
from ...errors import ItemNotScored
from ...requests import Rubrics, check_steps
from ...retry import RetryPolicy
from ...transport import read_token
from ...types import Logprobs, ScoringMode, mode_from_text
from .failures import MIN, OnError, parse_on_error
from .scoring import Groupwise, Sample, SampleReward, Scorer, items_of

SERVER_ENV, RUBRICS_ENV, ON_ERROR_ENV = "GEVAL_REWARD_SERVER", "GEVAL_REWARD_RUBRICS", "GEVAL_REWARD_ON_ERROR"
MODE_ENV = "GEVAL_REWARD_MODE"
GATE_ENV, GATE_REWARD_ENV = "GEVAL_REWARD_GATE", "GEVAL_REWARD_GATE_REWARD"
STEP_DELIMITER_ENV, STEP_REDUCTION_ENV = "GEVAL_REWARD_STEP_DELIMITER", "GEVAL_REWARD_STEP_REDUCTION"


class SampleScorer(Scorer):
    """A Scorer whose rewards are all numbers: on_error is a float, and a failure the
    completion did not cause raises ItemNotScored."""

    @classmethod
    def configure(
        cls,
        server: str | None = None,
        rubrics: Rubrics = None,
        on_error: OnError | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        token: str | None = None,
        mode: ScoringMode | str | None = None,
        wait_for_server_s: float | None = None,
        gate: str | None = None,
        gate_reward: float | None = None,
        steps: Mapping[str, str] | None = None,
    ) -> SampleScorer:
        """Each option left None is read from its environment variable, then defaulted.
        wait_for_server_s: how long to keep calling a server that is down or shedding load
        (None: RetryPolicy's default); the OpenRLHF bridge sets it so that a whole answer
        comes before OpenRLHF's HTTP timeout. gate: a served rule's name checked first
        ($GEVAL_REWARD_GATE): a completion that fails it gets gate_reward
        ($GEVAL_REWARD_GATE_REWARD, else 0.0) and the judge does not read it. steps: how process
        rewards split and reduce ({"delimiter": ..., "reduction": ...}); a key left out comes from
        $GEVAL_REWARD_STEP_DELIMITER or $GEVAL_REWARD_STEP_REDUCTION, else the server's default."""
        if on_error is None:
            on_error = os.environ.get(ON_ERROR_ENV, MIN)
            on_error = on_error if on_error in ("min", "exclude") else _number(on_error, ON_ERROR_ENV)
        return cls(
            server=server or os.environ.get(SERVER_ENV) or DEFAULT_TARGET,
            rubrics=rubrics if rubrics is not None else rubrics_from_text(os.environ.get(RUBRICS_ENV, "")) or None,
            on_error=parse_on_error(on_error, can_exclude=False),
            mode=_mode(mode),
            timeout=timeout,
            retry=RetryPolicy() if wait_for_server_s is None else RetryPolicy(wait_for_server_s=wait_for_server_s),
            token=token if token is not None else read_token(None),
            gate=gate or os.environ.get(GATE_ENV) or None,
            gate_reward=gate_reward if gate_reward is not None else (
                _number(os.environ[GATE_REWARD_ENV], GATE_REWARD_ENV) if os.environ.get(GATE_REWARD_ENV) else None),
            steps=_steps(steps),
        )

    def check_groupwise(self) -> None:
        """ScoreGroups reads the probabilities of the verdicts A and B; a mode for G-Eval's score
        slot would be silently ignored there, so it is refused."""
        if not isinstance(self.mode, Logprobs):
            raise ValueError(
                f"groupwise judging reads the verdict's probabilities; mode {self.mode!r} applies to pointwise "
                f"scoring only: leave mode (and {MODE_ENV}) unset"
            )

    def rewards(self, samples: Sequence[Sample]) -> list[SampleReward]:
        """One Score call; one reward per sample."""
        return _numbers(self.item_rewards(samples, self.score(items_of(samples))))

    async def rewards_async(self, samples: Sequence[Sample]) -> list[SampleReward]:
        return _numbers(self.item_rewards(samples, await self.score_async(items_of(samples))))

    def groupwise_rewards(
        self, samples: Sequence[Sample], groups: Sequence[Sequence[int]], groupwise: Groupwise
    ) -> list[SampleReward]:
        """One ScoreGroups call; groups hold indices into samples, each of one prompt and reference
        (groups.py). One reward per sample, in samples' order; a group of one gets the server's 0.5."""
        self._check_groups(samples)
        return _numbers(self.group_rewards(groups, self.score_groups(samples, groups, groupwise), len(samples)))

    async def groupwise_rewards_async(
        self, samples: Sequence[Sample], groups: Sequence[Sequence[int]], groupwise: Groupwise
    ) -> list[SampleReward]:
        self._check_groups(samples)
        results = await self.score_groups_async(samples, groups, groupwise)
        return _numbers(self.group_rewards(groups, results, len(samples)))

    def _check_groups(self, samples: Sequence[Sample]) -> None:
        self.check_groupwise()
        for sample in samples:
            if sample.rubrics:
                raise ValueError(
                    f"{sample.rubrics_origin}: the sample has its own rubrics, but ScoreGroups judges a call "
                    "with one set of rubrics: give them in the options instead"
                )


def _numbers(rewards: list[SampleReward]) -> list[SampleReward]:
    """The rewards, once none is left without a number."""
    for reward in rewards:
        if reward.unscored is not None:
            raise ItemNotScored(reward.unscored)
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


def _mode(mode: ScoringMode | str | None) -> ScoringMode:
    """A mode given as an object or as text ("reasoning:256", as configs and the environment
    write it); unset: GEVAL_REWARD_MODE, else log-probabilities."""
    if mode is None:
        try:
            return mode_from_text(os.environ.get(MODE_ENV) or "logprobs")
        except ValueError as error:
            raise ValueError(f"{MODE_ENV}: {error}") from None
    return mode_from_text(mode) if isinstance(mode, str) else mode


def _steps(steps: Mapping[str, str] | None) -> dict[str, str] | None:
    """The steps option, each key left out read from its environment variable; None when
    nothing sets either (the request then carries no steps, and the server's defaults hold)."""
    given = dict(steps or {})
    check_steps(given)
    for key, env in (("delimiter", STEP_DELIMITER_ENV), ("reduction", STEP_REDUCTION_ENV)):
        if given.get(key) is None and os.environ.get(env):
            given[key] = os.environ[env]
    return given or None


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{what}: expected a number, got {text!r}") from None
