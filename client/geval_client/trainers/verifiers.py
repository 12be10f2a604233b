"""G-Eval rewards for verifiers (0.4, its `verifiers.v1` API): a judge plugin.

verifiers resolves a judge plugin by id: `{"id": "geval-reward", ...}` in a task config's
`judges` (`--taskset.task.judges` on vf-replay, `--env.taskset.task.judges` on vf-eval)
imports the package `geval_reward` and takes the one Judge subclass in its `__all__`,
GEvalJudge, with its settings, GEvalJudgeConfig. After the task's own rewards,
`Task.score` builds the judge and awaits `score(task, trace)`.

What the judge reads: the input is the task's prompt as text (`question_field`: another
task field), the completion the trace's last reply or, with view "full_trace", its whole
transcript (verifiers' judge views), and the reference the task's `answer_field` ("answer"),
where the task has one (a list: one line per item). One rubric gives one reward; several
give a mapping, `<name>/<rubric>` -> that rubric's share of the reward (its reward times its
weight over the weights' sum), which verifiers records as rewards that add up to the
weighted mean the server gives. What the judge measured beside the reward is recorded as
metrics: each rubric's own reward under the same `<name>/<rubric>` (several rubrics), and
`<name>/label_mass`, `failed`, `score_claims_removed`, `bound_lowered`, `bound_gap`, and with a
process reward among the rubrics `<name>/steps`, `step_score_min`, `step_score_mean` and
`step_score/<k>` (shared/diagnostics.py). `steps` sets how the server splits and reduces them.

A judge failure raises, as verifiers' own judges do, so that it errors the rollout rather
than scoring the policy 0: the server unreachable (RewardServerError, once
`wait_for_server_s` is spent), an item the server could not score for a reason its
completion did not cause (ItemNotScored: a rubric that needs a reference and none, a prompt
over the judge's context). A completion that caused its own failure (empty, over the
server's field limit) gets `on_error` ("min": 0.0, as verifiers' judges score an empty reply).

verifiers scores every rollout on its own, many at once: each judge call is one trace.
Calls that arrive within `batch_window_s` of each other on one event loop go to the server
as one Score call (shared/coalescer.py); docs/trainers/verifiers.md gives what that saves.

This module needs verifiers (a plugin is a subclass of its Judge): nothing in the client
imports it; verifiers reaches it through `geval_reward`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from verifiers.v1 import Judge, JudgeConfig, TaskData, Trace
from verifiers.v1.judge import JudgeView, judge_question, judge_response

from ..defaults import DEFAULT_TIMEOUT_S
from ..errors import ItemNotScored
from ..requests import rubric_selection
from ..transport import read_token
from ..types import mode_from_text
from .shared.coalescer import Coalescer, coalescer_for
from .shared.diagnostics import sample_logs, sample_step_logs
from .shared.failures import MIN, parse_on_error
from .shared.sample_rewards import SampleScorer, reference_text
from .shared.scoring import Sample, SampleReward, items_of

PLUGIN_ID = "geval-reward"  # verifiers imports it as `geval_reward`, the package of the distribution


class GEvalJudgeConfig(JudgeConfig):
    """The judge's settings; the endpoint and model fields JudgeConfig has for LLM judges
    (base_url, model, sampling, prompt) do not apply: the server's judge model scores."""

    id: str = PLUGIN_ID
    server: str | list[str] | None = None
    """"host:port", or several (a list, or "a:1,b:2") for a fleet of replicas; None:
    $GEVAL_REWARD_SERVER, else localhost:50051."""
    rubrics: str | list[str] | dict[str, float] | None = None
    """A served rubric's name, several, or {name: weight}; None: $GEVAL_REWARD_RUBRICS
    ("a,b" or "a:1,b:2"), else the server's default rubric."""
    mode: str | None = None
    """How G-Eval rubrics read the score slot: "logprobs", "sampling:N" or
    "reasoning:MAX_TOKENS"; None: $GEVAL_REWARD_MODE, else logprobs."""
    token_file: Path | None = None
    """A file holding the server's bearer token; None: $GEVAL_REWARD_AUTH_TOKEN, if set."""
    timeout: float = Field(DEFAULT_TIMEOUT_S, gt=0)  # replaces JudgeConfig's HTTP timeouts
    """Seconds for one Score call, gRPC's retries included."""
    wait_for_server_s: float | None = Field(None, ge=0)
    """How long to keep calling a server that is down or shedding load before the judge
    raises; None: the client's default (300 s)."""
    on_error: Literal["min"] | float = MIN
    """The reward of a completion that caused its own failure (empty, too long)."""
    gate: str | None = None
    """A served rule checked first ("math-equal", against answer_field): a trace that fails it
    gets gate_reward and the judge does not read it; None: $GEVAL_REWARD_GATE, else none."""
    gate_reward: float | None = Field(None, ge=0, le=1)
    """What a trace that fails the gate gets; None: $GEVAL_REWARD_GATE_REWARD, else 0.0."""
    steps: dict[Literal["delimiter", "reduction"], str] | None = None
    """How process rewards split and reduce ({"delimiter": ..., "reduction": ...}); a key left
    out: $GEVAL_REWARD_STEP_DELIMITER, $GEVAL_REWARD_STEP_REDUCTION, else the server's."""
    view: JudgeView = "last_reply"
    """What of the rollout the judge reads as the completion: its last reply, or the
    whole transcript ("full_trace")."""
    question_field: str = ""
    """The task field the judge reads as the input; empty: the task's prompt as text."""
    answer_field: str = "answer"
    """The task field holding the reference, read where the task has it; empty: none."""
    batch_window_s: float = Field(0.01, ge=0)
    """Traces scored within this many seconds of each other go as one Score call."""
    max_batch: int = Field(64, ge=1)
    """The most traces in one Score call."""

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, mode: str | None) -> str | None:
        if mode is not None:
            mode_from_text(mode)
        return mode

    @field_validator("on_error")
    @classmethod
    def _finite(cls, on_error: str | float) -> str | float:
        parse_on_error(on_error, can_exclude=False)
        return on_error


class GEvalJudge(Judge[float, GEvalJudgeConfig]):
    """Scores a trace on the G-Eval reward server; see the module docstring."""

    def __init__(self, config: GEvalJudgeConfig | None = None) -> None:
        super().__init__(config)
        c = self.config
        scorer = SampleScorer.configure(
            server=c.server, rubrics=c.rubrics, on_error=c.on_error, timeout=c.timeout, mode=c.mode,
            token=read_token(c.token_file) if c.token_file else None, wait_for_server_s=c.wait_for_server_s,
            gate=c.gate, gate_reward=c.gate_reward, steps=c.steps,
        )
        self.scorer = dataclasses.replace(scorer, rubrics=_hashable(scorer.rubrics))
        self.weights = {choice.name: choice.weight if choice.HasField("weight") else 1.0
                        for choice in rubric_selection(self.scorer.rubrics)}

    async def score(self, task: TaskData, trace: Trace) -> float | dict[str, float]:
        sample = Sample(
            prompt=judge_question(task, self.config.question_field),
            completion=judge_response(trace, self.config.view),
            reference=self._reference(task),
        )
        reward = await self._coalescer()(sample)
        if reward.unscored is not None:
            raise ItemNotScored(f"{self.reward_name}: {reward.unscored}")
        logs = {**sample_logs(reward), **sample_step_logs(reward)}
        trace.record_metrics({f"{self.reward_name}/{key}": value for key, value in logs.items()})
        if len(self.weights) < 2:
            return reward.reward
        total = math.fsum(self.weights.values())
        shares = {}
        for rubric, weight in self.weights.items():
            own = reward.reward if reward.failed else reward.rubric_rewards[rubric]
            trace.record_metric(f"{self.reward_name}/{rubric}", own)
            shares[f"{self.reward_name}/{rubric}"] = own * weight / total
        return shares

    def _reference(self, task: TaskData) -> str | None:
        field = self.config.answer_field
        answer = getattr(task, field, None) if field else None
        if answer is None and field and "answer_field" in self.config.model_fields_set:
            raise ValueError(f"{self.reward_name}: the task has no {field!r} field (answer_field)")
        if isinstance(answer, list | tuple):
            answer = "\n".join(str(item) for item in answer)
        return reference_text(answer)

    def _coalescer(self) -> Coalescer[Sample, SampleReward]:
        scorer, c = self.scorer, self.config
        key: Hashable = (scorer, c.batch_window_s, c.max_batch)

        async def send(samples: list[Sample]) -> list[SampleReward]:
            return scorer.item_rewards(samples, await scorer.score_async(items_of(samples)))

        return coalescer_for(key, lambda: Coalescer(send, c.batch_window_s, c.max_batch))


def _hashable(rubrics: Any) -> Any:
    """The rubrics as RewardClient takes them, hashable: the coalescers are kept per Scorer."""
    if isinstance(rubrics, dict):
        return tuple(rubrics.items())
    return tuple(rubrics) if isinstance(rubrics, list) else rubrics


__all__ = ["GEvalJudge", "GEvalJudgeConfig"]
