"""skyrl-gym's own registry and make, running GEvalEnv (geval_client.trainers.skyrl) through the
loop SkyRL's generator runs (make with env_config and extras, init, step until done), against a
scripted judge served over gRPC; then skyrl-gym's aggregate_for_environment over the episodes'
metrics. A failure the reply did not cause, and a server that is down, raise from step."""

from __future__ import annotations

import json
import socket

import pytest

from tests.frameworks.conftest import installed, run_with
from tests.unit.fakes import serve_in_process
from tests.unit.test_framework_adapters import ScriptedJudge

VERSION = "0.4.0"

EPISODES = r"""
import json, os
import skyrl_gym
from skyrl_gym.metrics import aggregate_for_environment
from geval_client.trainers.skyrl import register_geval_env

register_geval_env(server=os.environ["JUDGE"], rubrics="a")
register_geval_env("geval_per_turn", server=os.environ["JUDGE"], rubrics="a", per_turn=True, follow_up="Shorter.")
register_geval_env("geval_down", server=os.environ["DOWN"], wait_for_server_s=1.0)
PROMPT = [{"role": "user", "content": "Summarize."}]

def episode(env_class, replies, extras):
    # As SkyRL's generator: extras are the row's columns with max_turns added.
    try:
        env = skyrl_gym.make(env_class, env_config={}, extras=extras)
        env.init(PROMPT)
        steps = []
        for reply in replies:
            out = env.step(reply)
            steps.append({"reward": out["reward"], "done": out["done"], "observations": out["observations"]})
            if out["done"]:
                break
        return {"class": type(env).__name__, "steps": steps, "metrics": env.get_metrics()}
    except BaseException as error:
        return {"error": type(error).__name__, "message": str(error)}

row = {"reward_spec": {"ground_truth": "R"}, "max_turns": 1}
three = {"reward_spec": {"ground_truth": "R"}, "max_turns": 3, "follow_ups": ["More?", "Last?"]}
outcomes = {
    "single": episode("geval", ["Ten chars!"], row),
    "empty": episode("geval", [""], row),
    "multi": episode("geval", ["One.", "Two..", "Twelve chars"], three),
    "per_turn": episode("geval_per_turn", ["One.", "Two..", "Twelve chars"], {**three, "follow_ups": None}),
    "own_rubric": episode("geval", ["Own rubric."], {"reward_spec": {"ground_truth": "R", "rubrics": "b"}}),
    "no_follow_up": episode("geval", ["One."], {"max_turns": 2}),
    "unscorable": episode("geval", ["Fine."], {"reward_spec": {"ground_truth": "MISSING"}, "max_turns": 1}),
    "down": episode("geval_down", ["Fine."], row),
}
outcomes["aggregated"] = aggregate_for_environment(
    "geval", [outcomes[name]["metrics"] for name in ("single", "empty", "multi")])
print(json.dumps(outcomes))
"""


@pytest.fixture(scope="module")
def judge():
    yield from serve_in_process(ScriptedJudge())


@pytest.fixture(scope="module")
def outcomes(judge) -> dict:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        down = f"127.0.0.1:{closed.getsockname()[1]}"
    out = run_with([installed("skyrl-gym", VERSION)], EPISODES, timeout=120, env={"JUDGE": judge.address, "DOWN": down})
    return json.loads(out.strip().splitlines()[-1])


def _rewards(outcome):
    return [step["reward"] for step in outcome["steps"]]


def test_skyrl_single_turn_reward_with_the_reference_from_the_extras(outcomes, judge):
    single = outcomes["single"]
    assert single["class"] == "GEvalEnv"
    assert single["steps"] == [{"reward": pytest.approx(0.1), "done": True, "observations": []}]
    assert single["metrics"]["geval_label_mass"] == pytest.approx(0.75)
    scored = [item for request in judge.requests for item in request.items if item.completion == "Ten chars!"]
    assert [item.reference for item in scored] == ["R"]
    assert [(m.role, m.content) for m in scored[0].chat.messages] == [("user", "Summarize.")]


def test_skyrl_an_empty_reply_gets_on_error(outcomes):
    assert _rewards(outcomes["empty"]) == [0.0]
    assert outcomes["empty"]["metrics"]["geval_failed"] == 1.0


def test_skyrl_multi_turn_judges_the_last_reply_in_its_conversation(outcomes, judge):
    multi = outcomes["multi"]
    assert _rewards(multi) == [0.0, 0.0, pytest.approx(0.12)]
    assert [step["done"] for step in multi["steps"]] == [False, False, True]
    assert [step["observations"] for step in multi["steps"][:2]] == [[{"role": "user", "content": "More?"}],
                                                                    [{"role": "user", "content": "Last?"}]]
    [last] = [item for request in judge.requests for item in request.items
              if item.completion == "Twelve chars" and item.reference == "R" and len(item.chat.messages) == 5
              and item.chat.messages[-1].content == "Last?"]
    assert [(m.role, m.content) for m in last.chat.messages] == [
        ("user", "Summarize."), ("assistant", "One."), ("user", "More?"), ("assistant", "Two.."), ("user", "Last?")]


def test_skyrl_per_turn_judges_every_reply(outcomes):
    per_turn = outcomes["per_turn"]
    assert _rewards(per_turn) == [pytest.approx(0.04), pytest.approx(0.05), pytest.approx(0.12)]
    assert per_turn["steps"][0]["observations"] == [{"role": "user", "content": "Shorter."}]


def test_skyrl_aggregates_the_episodes_metrics(outcomes):
    aggregated = outcomes["aggregated"]
    assert aggregated["geval_failed"] == pytest.approx(1 / 3)
    assert aggregated["geval_label_mass"] == pytest.approx(0.5)


def test_skyrl_raises_what_no_reward_can_stand_for(outcomes):
    assert outcomes["unscorable"]["error"] == "ItemNotScored"
    assert "reference: is required" in outcomes["unscorable"]["message"]
    assert outcomes["down"]["error"] == "RewardServerError", outcomes["down"]
    assert outcomes["no_follow_up"]["error"] == "ValueError"
    assert "follow_up" in outcomes["no_follow_up"]["message"]


def test_skyrl_a_rows_own_rubric_from_its_reward_spec(outcomes, judge):
    assert _rewards(outcomes["own_rubric"]) == [pytest.approx(0.11)]
    [item] = [item for request in judge.requests for item in request.items if item.completion == "Own rubric."]
    assert [rubric.name for rubric in item.rubrics] == ["b"]
