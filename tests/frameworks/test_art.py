"""ART's own gather_trajectory_groups, from its wheel (the oldest and newest 0.5), with
geval_client.trainers.art.score_group in after_each where ART's users put
art.rewards.ruler_score_group. Trajectories are built as ART's rollouts build them (system and
user messages, the model's reply as an OpenAI Choice), the reference in their metadata.
Pointwise and groupwise, a completion that fails for its own reason, a failure it did not cause
and a server that is down, with swallow_exceptions both ways, and a group whose rollouts all
failed."""

from __future__ import annotations

import json

import pytest

from tests.frameworks.conftest import installed, run_with
from tests.unit.fakes import serve_in_process
from tests.unit.test_framework_adapters import ScriptedJudge
from tests.unit.test_groupwise_adapters import GroupJudge

# Each version with what `import art` needs beyond the test environment: litellm at the newest
# the version allows (0.5.0 pins it, and openai below 2).
VERSIONS = {
    "0.5.0": [("litellm", "1.74.1"), ("openai", "1.99.1"), ("distro", "1.9.0")],
    "0.5.18": [("polars", "2.1.0"), ("litellm", "1.82.0"), ("fastuuid", "0.14.0")],
}

GATHER = r"""
import asyncio, json, os, socket
import art
from openai.types.chat.chat_completion import ChatCompletionMessage, Choice
from geval_client.trainers.art import score_group

def trajectory(reply, reward, reference="R"):
    return art.Trajectory(
        messages_and_choices=[{"role": "system", "content": "You summarize."},
                              {"role": "user", "content": "Summarize the text."},
                              Choice(index=0, finish_reason="stop",
                                     message=ChatCompletionMessage(role="assistant", content=reply))],
        reward=reward, metadata={"reference": reference})

HAS_METADATA = "metadata" in art.TrajectoryGroup.model_fields  # not in 0.5.0

async def rollouts(replies, reference="R"):  # a scenario's rollouts, as ART awaits them
    return art.TrajectoryGroup([trajectory(reply, float(k + 1), reference) for k, reply in enumerate(replies)],
                               **({"metadata": {"scenario": "s1"}} if HAS_METADATA else {}))

def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"

def view(group):
    return {"rewards": [t.reward for t in group.trajectories], "metrics": [t.metrics for t in group.trajectories],
            "metadata": group.metadata if HAS_METADATA else None}

def gather(scenarios, **options):
    async def run():
        return await art.gather_trajectory_groups(
            [rollouts(*scenario) for scenario in scenarios], pbar_desc=None,
            after_each=lambda group: score_group(group, **options))
    try:
        return [view(group) for group in asyncio.run(run())]
    except BaseException as error:
        return {"error": type(error).__name__, "message": str(error)}

judge = os.environ["JUDGE"]
out = {
    "pointwise": gather([(["Ten chars!", "", "Twelve chars"],)], server=judge, rubrics="a"),
    "groupwise": gather([(["aa", "a", "aaa"],)], server=judge, rubrics="a", groupwise=True),
    "unscorable, swallowed": gather([(["Fine."],), (["Fine."], "MISSING")], server=judge, rubrics="a",
                                    swallow_exceptions=True),
    "unscorable, raised": gather([(["Fine."], "MISSING")], server=judge, rubrics="a"),
    "down, swallowed": gather([(["Fine."],)], server=closed_port(), swallow_exceptions=True, wait_for_server_s=0),
    "down, raised": gather([(["Fine."],)], server=closed_port(), wait_for_server_s=0),
}
async def failing():
    raise RuntimeError("the rollout failed")

async def every_rollout_failed():  # max_exceptions lets gather go on, the group holds the errors
    return await art.gather_trajectory_groups([art.TrajectoryGroup(failing() for _ in range(2))], pbar_desc=None,
                                              max_exceptions=2, after_each=lambda g: score_group(g, judge, "a"))
out["every rollout failed"] = [{"trajectories": len(g.trajectories), "exceptions": [e.message for e in g.exceptions]}
                               for g in asyncio.run(every_rollout_failed())]
group = asyncio.run(rollouts(["Fine."]))
asyncio.run(score_group(group, judge, "a"))
out["original"] = view(group)
out["has metadata"] = HAS_METADATA
print(json.dumps(out))
"""


class Judge(ScriptedJudge):
    """Score as ScriptedJudge (len/100; an empty completion fails for its own reason, a reference
    "MISSING" for the data's), ScoreGroups as GroupJudge (the longer completion wins)."""

    ScoreGroups = GroupJudge.ScoreGroups
    _group = GroupJudge._group


@pytest.fixture(scope="module")
def judge():
    yield from serve_in_process(Judge())


@pytest.fixture(scope="module", params=sorted(VERSIONS))
def outcomes(request, judge) -> dict:
    """Every case through one ART version in one interpreter (importing ART takes seconds)."""
    paths = [installed("openpipe-art", request.param)] + [installed(name, v) for name, v in VERSIONS[request.param]]
    out = run_with(paths, GATHER, timeout=300, env={"JUDGE": judge.address})
    return json.loads(out.strip().splitlines()[-1])


def test_art_groups_get_our_rewards_and_keep_their_earlier_ones(outcomes, judge):
    [group] = outcomes["pointwise"]
    assert group["rewards"] == pytest.approx([0.1, 0.0, 0.12])
    assert [m["independent_reward"] for m in group["metrics"]] == [1.0, 2.0, 3.0]
    assert [m["geval_score"] for m in group["metrics"]] == pytest.approx([0.1, 0.0, 0.12])
    # The empty reply failed for its own reason: on_error's 0.0, marked failed.
    assert [m["geval_failed"] for m in group["metrics"]] == [0.0, 1.0, 0.0]
    assert group["metadata"] == ({"scenario": "s1"} if outcomes["has metadata"] else None)  # 0.5.0 has none
    request = next(r for r in judge.requests if [i.completion for i in r.items] == ["Ten chars!", "", "Twelve chars"])
    item = request.items[0]
    assert [(m.role, m.content) for m in item.chat.messages] == [
        ("system", "You summarize."), ("user", "Summarize the text.")]
    assert item.reference == "R"


def test_art_groupwise_judges_the_group_within_itself(outcomes):
    [group] = outcomes["groupwise"]
    assert group["rewards"] == pytest.approx([0.5, 0.0, 1.0])
    assert [m["independent_reward"] for m in group["metrics"]] == [1.0, 2.0, 3.0]


def test_art_a_failure_is_left_out_when_swallowed_and_raised_otherwise(outcomes):
    """A reference the judge cannot use says nothing about the replies: with swallow_exceptions
    the group is left out (gather_trajectory_groups drops the None), else the error stops gather."""
    swallowed = outcomes["unscorable, swallowed"]
    assert [group["rewards"] for group in swallowed] == [pytest.approx([0.05])]
    raised = outcomes["unscorable, raised"]
    assert raised["error"] == "ItemNotScored" and "items[0].reference: is required" in raised["message"]


def test_art_a_server_that_is_down_is_never_a_reward(outcomes):
    assert outcomes["down, swallowed"] == []
    raised = outcomes["down, raised"]
    assert raised["error"] == "RewardServerError" and "UNAVAILABLE" in raised["message"]


def test_art_the_group_passed_in_is_left_as_it_was(outcomes):
    assert outcomes["original"]["rewards"] == [1.0]
    assert outcomes["original"]["metrics"] == [{}]


def test_art_a_group_whose_rollouts_all_failed_is_returned_without_a_call(outcomes):
    """As RULER returns it: no trajectory to judge; the group's exceptions are kept (RULER's drops them)."""
    assert outcomes["every rollout failed"] == [{"trajectories": 0, "exceptions": ["the rollout failed"] * 2}]
