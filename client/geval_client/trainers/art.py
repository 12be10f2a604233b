"""G-Eval rewards for OpenPipe's ART: a drop-in for `art.rewards.ruler_score_group`.

ART's users score a TrajectoryGroup after its rollouts, in gather_trajectory_groups'
`after_each`, with RULER (one LLM call ranks the group). score_group takes the same place:

    groups = await art.gather_trajectory_groups(
        (art.TrajectoryGroup(rollout(model, scenario) for _ in range(4)) for scenario in scenarios),
        after_each=lambda group: score_group(group, "judge:50051", "summeval-coherence",
                                             swallow_exceptions=True),
    )

As RULER does, it returns a new group (the one passed in is left as it was) whose
trajectories carry our reward, each with its earlier reward kept in
metrics["independent_reward"], ours in metrics["geval_score"] and the judge's signals beside
it (metrics["geval_label_mass"], ...: diagnostics.sample_logs). Unlike RULER's, the new group
keeps the group's own exceptions (the rollouts that failed) and metadata, metrics and logs.

What the judge reads of a trajectory (trajectory.messages()): the messages before its first
assistant message are the prompt (system and user, as chat), the text of its assistant
messages from there on is the completion (tool calls and tool results are not shown), and
trajectory.metadata[reference_key] ("reference"), where it is text, is the reference.

Pointwise (Score, the default), each trajectory is judged alone; with groupwise=True
(ScoreGroups) against the other trajectories of its group with the same prompt and reference,
as RULER judges a group. A completion that fails for its own reason (empty, over the judge's
limits) gets on_error ("min", 0.0, or a float); any other failure (the server down, a judge
error, a prompt the judge cannot read) raises. With swallow_exceptions=True, as with RULER's,
such a group is logged and left out instead (None, which gather_trajectory_groups drops);
either way no trajectory trains on a made-up reward. Options that are wrong raise whatever
swallow_exceptions says, as RULER's own checks do.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from ..defaults import DEFAULT_TIMEOUT_S
from ..requests import Rubrics
from ..types import ScoringMode
from .shared.diagnostics import sample_logs
from .shared.failures import OnError
from .shared.groups import group_key, groups_by_key, nobody_to_compare
from .shared.sample_rewards import SampleScorer, reference_text
from .shared.scoring import Groupwise, Sample
from .shared.trainer_text import completion_text, judge_prompt

log = logging.getLogger(__name__)

REFERENCE_KEY = "reference"


async def score_group(
    group: Any,
    server: str | None = None,
    rubrics: Rubrics = None,
    *,
    groupwise: bool = False,
    schedule: str | None = None,
    aggregation: str = "mean_win_probability",
    on_error: OnError | None = None,
    mode: ScoringMode | str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    wait_for_server_s: float | None = None,
    reference_key: str = REFERENCE_KEY,
    swallow_exceptions: bool = False,
    gate: str | None = None,
    gate_reward: float | None = None,
    steps: Mapping[str, str] | None = None,
) -> Any:
    """A new art.TrajectoryGroup with G-Eval rewards, as ruler_score_group returns one.

    Args:
        group: an art.TrajectoryGroup (none of its trajectories with additional_histories).
        server: "host:port" or a fleet; None: $GEVAL_REWARD_SERVER, else localhost:50051.
        rubrics: a name, a list or {name: weight}; None: $GEVAL_REWARD_RUBRICS, else the
            server's default (the environment is read in shared/sample_rewards.py).
        on_error: "min" or a float, for a completion that caused its own failure; None:
            $GEVAL_REWARD_ON_ERROR, else "min".
        mode: how G-Eval rubrics read the slot; None: $GEVAL_REWARD_MODE, else Logprobs().
        timeout: each call's deadline in seconds, gRPC's retries included.
        wait_for_server_s: how long a server that is down is called again before the group
            fails; None: the client's 300 s.
        groupwise: judge each trajectory against the others of its group (ScoreGroups), with
            schedule and aggregation as ScoreGroups takes them; else each alone (Score).
        reference_key: the trajectory.metadata key holding the reference.
        swallow_exceptions: a scoring failure returns None (the group left out) instead of raising.
        gate: a rule checked first ("math-equal", on metadata's reference): a trajectory that fails it
            gets gate_reward (default 0.0) and the judge does not read it. None: $GEVAL_REWARD_GATE.
        steps: how process rewards split and reduce, {"delimiter": ..., "reduction": ...}; a key
            left out: $GEVAL_REWARD_STEP_DELIMITER, $GEVAL_REWARD_STEP_REDUCTION, else the server's.

    Returns:
        The new group, or None when swallow_exceptions is set and scoring failed.

    Example:
        scored = await score_group(group, "judge:50051", "summeval-coherence")
        scored.trajectories[0].reward  # -> 0.71; metrics["independent_reward"]: the reward before
    """
    if not groupwise and (schedule is not None or aggregation != "mean_win_probability"):
        raise ValueError("schedule and aggregation choose how groups are judged: they need groupwise=True")
    judged_as = Groupwise(schedule, aggregation) if groupwise else None
    scorer = SampleScorer.configure(server, rubrics, on_error, timeout, mode=mode, wait_for_server_s=wait_for_server_s,
                                    gate=gate, gate_reward=gate_reward, steps=steps)
    if judged_as is not None:
        scorer.check_groupwise()
    samples = [trajectory_sample(trajectory, reference_key) for trajectory in group.trajectories]
    if not samples:  # every rollout failed (group.exceptions holds why): nothing to judge, as RULER
        return _regrouped(group, [])
    try:
        if judged_as is None:
            rewards = await scorer.rewards_async(samples)
        else:
            rewards = await scorer.groupwise_rewards_async(samples, _groups(samples, schedule), judged_as)
    except Exception as error:
        if not swallow_exceptions:
            raise
        log.warning("geval_client.trainers.art.score_group: group left out: %s: %s", type(error).__name__, error)
        return None
    trajectories = []
    for trajectory, reward in zip(group.trajectories, rewards):
        metrics = {**trajectory.metrics, "independent_reward": trajectory.reward, "geval_score": reward.reward,
                   **{f"geval_{key}": value for key, value in sample_logs(reward).items()}}
        trajectories.append(trajectory.model_copy(update={"reward": reward.reward, "metrics": metrics}))
    return _regrouped(group, trajectories)


def _regrouped(group: Any, trajectories: list[Any]) -> Any:
    """A new group of `trajectories` with the rest of `group`'s fields (exceptions, and in later
    ART 0.5 releases metadata, metrics, logs). Made by the constructor: ART 0.5.0's TrajectoryGroup cannot be
    copied (its __new__ needs the trajectories), and the constructor takes exceptions only as raised."""
    regrouped = type(group)(trajectories)
    for name in type(group).model_fields:
        if name != "trajectories":
            setattr(regrouped, name, copy.copy(getattr(group, name)))
    return regrouped


def trajectory_sample(trajectory: Any, reference_key: str = REFERENCE_KEY) -> Sample:
    """What the judge reads of one trajectory: the messages before its first assistant message
    as the prompt, the text of its assistant messages as the completion."""
    if trajectory.additional_histories:
        raise ValueError(
            "geval_client.trainers.art: a trajectory with additional_histories cannot be judged as one "
            "prompt and completion (RULER refuses them too)"
        )
    messages = trajectory.messages()
    first = next((i for i, message in enumerate(messages) if message["role"] == "assistant"), len(messages))
    return Sample(
        prompt=judge_prompt(messages[:first]),
        completion=completion_text(messages[first:]),
        reference=reference_text(trajectory.metadata.get(reference_key)),
    )


def _groups(samples: list[Sample], schedule: str | None) -> list[list[int]]:
    """An ART group is one scenario's rollouts; those with another prompt or reference are judged apart."""
    groups = groups_by_key([group_key(sample.prompt, sample.reference) for sample in samples])
    if nobody_to_compare(groups, schedule):
        log.warning(
            "geval_client.trainers.art.score_group: no trajectory shares its prompt and reference with another, "
            "so each gets 0.5 (compared with nobody); groupwise rewards need groups of 2 or more"
        )
    return groups
