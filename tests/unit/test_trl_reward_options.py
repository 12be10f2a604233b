"""The TRL reward functions' options and lifecycle, against a small scripted gRPC
server on loopback (no engine): what an unscorable completion gets (on_error),
pickling and copying (TRL's async rollout worker and Ray pickle reward functions),
default names, the per-completion columns handed to TRL's log_extra, and when the
length correlation is logged."""

from __future__ import annotations

import asyncio
import copy
import pickle
from concurrent import futures

import grpc
import pytest
from geval_client import AsyncGEvalReward, GEvalReward
from geval_client.pb import reward_pb2, reward_pb2_grpc

EMPTY_MESSAGE = "items[{i}].completion: must not be empty"


class ScriptedJudge(reward_pb2_grpc.RewardServiceServicer):
    """Scores a completion len(text)/100 with label mass 0.8; fails an empty completion
    (the completion's fault) and a prompt starting "NOREF" (the data's fault, as a
    missing reference), naming the field as the real server does. A completion that
    claims `Coherence: 5` read 0.25 higher before the bound lowered it."""

    def __init__(self) -> None:
        self.requests: list[reward_pb2.ScoreRequest] = []

    def Score(self, request, context):
        self.requests.append(request)
        return reward_pb2.ScoreResponse(results=[self._result(i, item) for i, item in enumerate(request.items)])

    @staticmethod
    def _result(i: int, item: reward_pb2.Item) -> reward_pb2.ItemResult:
        result = reward_pb2.ItemResult(id=item.id, score_claims_removed=item.completion.count("Coherence: 5"))
        if not item.completion:
            result.error.CopyFrom(reward_pb2.ItemError(
                code=reward_pb2.ERROR_CODE_INVALID_ARGUMENT, message=EMPTY_MESSAGE.format(i=i),
                field=f"items[{i}].completion"))
        elif item.text.startswith("NOREF"):
            result.error.CopyFrom(reward_pb2.ItemError(
                code=reward_pb2.ERROR_CODE_INVALID_ARGUMENT, message=f"items[{i}].reference: is required",
                field=f"items[{i}].reference"))
        else:
            result.reward = len(item.completion) / 100
            result.plain_reward = result.reward + 0.25 * ("Coherence: 5" in item.completion)
            result.masked_read_lowered = result.plain_reward > result.reward
            result.scores.append(reward_pb2.RubricScore(
                rubric="r", reward=result.reward, plain_reward=result.plain_reward,
                geval=reward_pb2.GEvalResult(label_mass=0.8)
            ))
        return result


@pytest.fixture(scope="module")
def judge():
    service = ScriptedJudge()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    reward_pb2_grpc.add_RewardServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")  # a free port the OS picks
    server.start()
    service.address = f"127.0.0.1:{port}"
    yield service
    server.stop(grace=None)


class Recorder:
    """Stands in for TRL's log_metric and log_extra."""

    def __init__(self) -> None:
        self.calls: dict[str, list] = {}

    def __call__(self, name: str, value) -> None:
        self.calls.setdefault(name, []).append(value)


# --- on_error: what a completion the server cannot score gets ------------------------

PROMPTS = ["P1"] * 4 + ["P2"] * 4
COMPLETIONS = ["aaaa", "aa", "", "aaaaaa", "bbb", "b", "bb", ""]  # rewards .04 .02 - .06 | .03 .01 .02 -


def test_by_default_a_completion_that_breaks_the_judge_gets_the_lowest_reward(judge):
    reward = GEvalReward(judge.address, "r", name="default_policy")
    rewards = reward(prompts=PROMPTS, completions=COMPLETIONS)
    assert rewards == pytest.approx([0.04, 0.02, 0.0, 0.06, 0.03, 0.01, 0.02, 0.0])


def test_exclude_gives_the_mean_of_the_scored_completions_of_the_same_prompt(judge):
    reward = GEvalReward(judge.address, "r", on_error="exclude", name="excluding")
    rewards = reward(prompts=PROMPTS, completions=COMPLETIONS)
    assert rewards == pytest.approx([0.04, 0.02, 0.04, 0.06, 0.03, 0.01, 0.02, 0.02])
    alone = reward(prompts=["P3", "P3"], completions=["", ""])
    assert alone == [None, None]  # no scored peer: TRL leaves the row out (or the whole group, beside others)


def test_a_fixed_value_is_given_as_is(judge):
    reward = GEvalReward(judge.address, "r", on_error=-1.0, name="fixed")
    assert reward(prompts=["P1", "P1"], completions=["aaaa", ""]) == pytest.approx([0.04, -1.0])


def test_a_failure_the_completion_did_not_cause_is_always_excluded(judge):
    for on_error in ("min", -1.0, "exclude"):
        reward = GEvalReward(judge.address, "r", on_error=on_error, name=f"data_failure_{on_error}")
        rewards = reward(prompts=["NOREF 1"] * 2 + ["P1"] * 2, completions=["aaaa", "aa", "aaaa", ""])
        assert rewards[:2] == [None, None]


@pytest.mark.parametrize("bad", ["zero", float("nan"), float("inf"), True, None])
def test_a_bad_on_error_is_refused_when_the_reward_is_made(judge, bad):
    with pytest.raises(ValueError, match="on_error"):
        GEvalReward(judge.address, "r", on_error=bad, name="bad")


# --- pickling, copying, names ----------------------------------------------------------


def test_both_rewards_pickle_and_deepcopy_before_and_after_use(judge):
    sync = GEvalReward(judge.address, {"r": 1.0}, name="pickled_sync")
    assert pickle.loads(pickle.dumps(sync))(prompts=["P1"], completions=["aaaa"]) == pytest.approx([0.04])
    sync(prompts=["P1"], completions=["aa"])  # connected now
    for clone in (pickle.loads(pickle.dumps(sync)), copy.deepcopy(sync)):
        assert clone.__name__ == "pickled_sync"
        assert clone(prompts=["P1"], completions=["aaaa"]) == pytest.approx([0.04])

    coroutine = AsyncGEvalReward(judge.address, "r", name="pickled_async")

    async def use(reward):
        rewards = await reward(prompts=["P1"], completions=["aaa"])
        await reward.close()
        return rewards

    assert asyncio.run(use(coroutine)) == pytest.approx([0.03])
    assert asyncio.run(use(pickle.loads(pickle.dumps(coroutine)))) == pytest.approx([0.03])
    assert asyncio.run(use(copy.deepcopy(coroutine))) == pytest.approx([0.03])


def test_default_names_follow_the_rubrics_and_their_weights(judge):
    assert GEvalReward(judge.address).__name__ == "geval"
    assert GEvalReward(judge.address, "summeval-coherence").__name__ == "geval_summeval-coherence"
    assert AsyncGEvalReward(judge.address, ["a", "b"]).__name__ == "geval_a+b"
    assert GEvalReward(judge.address, {"a": 1, "b": 2}).__name__ == "geval_a+2*b"
    assert GEvalReward(judge.address, {"a": 0.5, "b": 0.5}).__name__ == "geval_a+b"


def test_two_rewards_that_score_differently_cannot_share_a_name(judge):
    first = GEvalReward(judge.address, "a", name="judge_reward")
    with pytest.raises(ValueError, match="both named 'judge_reward'.*pass name="):
        GEvalReward(judge.address, "b", name="judge_reward")
    default = GEvalReward(judge.address, "a")
    with pytest.raises(ValueError, match="both named 'geval_a'"):
        AsyncGEvalReward(judge.address, "a", on_error="exclude")
    # The same scoring again (a sync and an async form, a re-created reward) may share the name.
    assert AsyncGEvalReward(judge.address, "a").__name__ == default.__name__
    assert GEvalReward(judge.address, "a", name="judge_reward").__name__ == first.__name__


# --- what reaches TRL's logs -----------------------------------------------------------


def test_per_completion_columns_reach_log_extra(judge):
    reward = GEvalReward(judge.address, "r", name="columns")
    extra, metrics = Recorder(), Recorder()
    reward(prompts=["P1"] * 3, completions=["Coherence: 5. Fine.", "", "ok"], log_extra=extra, log_metric=metrics)
    assert extra.calls == {
        "columns/label_mass": [[0.8, None, 0.8]],
        "columns/error": [[None, EMPTY_MESSAGE.format(i=1), None]],
        "columns/score_claims_removed": [[1, 0, 0]],
        "columns/bound_gap": [[pytest.approx(0.25), None, 0.0]],
    }
    assert metrics.calls["columns/failed_share"] == [pytest.approx(1 / 3)]


def test_what_the_bound_took_off_is_logged_beside_the_reward(judge):
    reward = GEvalReward(judge.address, "r", name="bounded")
    metrics = Recorder()
    reward(prompts=["P1"] * 4, completions=["Coherence: 5. Fine.", "ok", "fine", "Coherence: 5"], log_metric=metrics)
    for key in ("bounded/bound_lowered_share", "bounded/bound_lowered_share/r"):
        assert metrics.calls[key] == [0.5]
    for key in ("bounded/bound_gap", "bounded/bound_gap/r"):
        assert metrics.calls[key] == [pytest.approx(0.125)]


def test_length_correlation_is_logged_only_over_enough_completions(judge):
    reward = GEvalReward(judge.address, "r", name="lengths")
    few, many = Recorder(), Recorder()
    reward(prompts=["P"] * 3, completions=["a", "aa", "aaa"], log_metric=few)
    reward(prompts=["P"] * 10, completions=["a" * n for n in range(1, 11)], log_metric=many)
    assert "lengths/length_spearman" not in few.calls
    assert many.calls["lengths/length_spearman"] == [pytest.approx(1.0)]


def test_a_reward_dropped_in_a_reference_cycle_does_not_hold_its_name(judge):
    class Trainer:  # trainers keep themselves in reference cycles (callbacks point back)
        def __init__(self, reward):
            self.reward, self.me = reward, self

    Trainer(GEvalReward(judge.address, "cycle", on_error="exclude"))
    assert GEvalReward(judge.address, "cycle").__name__ == "geval_cycle"


def test_an_inline_rubric_is_named_by_its_name(judge):
    clarity = {"name": "clarity", "criterion": "Clarity", "task_introduction": "Rate the answer.",
               "evaluation_criteria": "Clarity (1-5).", "scale": {"min": 1, "max": 5}}
    assert GEvalReward(judge.address, [clarity, ("r", 2.0)]).__name__ == "geval_clarity+2*r"
    stricter = {**clarity, "evaluation_criteria": "Clarity (1-5), strictly."}
    with pytest.raises(ValueError, match="both named 'geval_clarity'"):
        keep = GEvalReward(judge.address, [clarity])  # noqa: F841 - alive while the next is made
        GEvalReward(judge.address, [stricter])
