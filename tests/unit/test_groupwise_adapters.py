"""The groupwise forms for veRL's batch manager and OpenRLHF, against a scripted ScoreGroups on
loopback, each called the way its framework calls a reward (the mirrors name the file they follow):
groups found wherever their members stand, results back in batch order, a group of one, a failed
member, and the same keys for every sample."""

from __future__ import annotations

import json
import logging
import math
import threading
import urllib.error
import urllib.request
from collections import defaultdict
from functools import partial

import pytest
from geval_client.errors import ItemNotScored
from geval_client.pb import reward_pb2, reward_pb2_grpc
from geval_client.trainers import openrlhf, openrlhf_bridge, verl
from geval_client.trainers.shared.groups import groups_by_key, groups_of
from geval_client.trainers.shared.sample_rewards import SampleScorer
from geval_client.trainers.shared.scoring import Groupwise
from geval_client.trainers.trl import GroupwiseReward, find_groups

from tests.unit.fakes import serve_in_process

# --- a scripted judge -------------------------------------------------------------------


def _beats(a: str, b: str) -> float:
    """The scripted verdict: the longer text wins, equal lengths tie."""
    return 1.0 if len(a) > len(b) else 0.5 if len(a) == len(b) else 0.0


class GroupJudge(reward_pb2_grpc.RewardServiceServicer):
    """ScoreGroups: a member's reward is its mean verdict against the other members that did not
    fail (0.5 with none; under the anchor schedule, its verdict against the reference). An empty
    completion fails for its own reason, one reading JUDGE-ERROR for the judge's, a reference
    "MISSING" fails its group, and so does a completion "OVER-LIMIT", as the server's request
    check fails a group for a member over --max-field-chars; "5/5" counts as a removed score claim. Score: the
    pointwise reward len/100, to compare the key sets of the two batch forms."""

    def __init__(self) -> None:
        self.requests: list[reward_pb2.ScoreGroupsRequest] = []

    def ScoreGroups(self, request, context):
        self.requests.append(request)
        rubrics = [r.name for r in request.rubrics] or ["d"]
        return reward_pb2.ScoreGroupsResponse(results=[
            self._group(g, group, rubrics, request.schedule) for g, group in enumerate(request.groups)])

    def _group(self, g, group, rubrics, schedule):
        result = reward_pb2.GroupResult(id=group.id, schedule=schedule)
        if group.reference == "MISSING":
            result.error.CopyFrom(reward_pb2.ItemError(
                code=reward_pb2.ERROR_CODE_INVALID_ARGUMENT, message=f"groups[{g}].reference: is required",
                field=f"groups[{g}].reference"))
            return result
        if "OVER-LIMIT" in group.completions:
            i = list(group.completions).index("OVER-LIMIT")
            result.error.CopyFrom(reward_pb2.ItemError(
                code=reward_pb2.ERROR_CODE_INVALID_ARGUMENT, field=f"groups[{g}].completions[{i}]",
                message=f"groups[{g}].completions[{i}]: 200001 characters exceed the limit of 200000"))
            return result
        texts = list(group.completions)
        ok = [i for i, text in enumerate(texts) if text and text != "JUDGE-ERROR"]
        rewards = []
        for i, text in enumerate(texts):
            completion = result.completions.add(score_claims_removed=text.count("5/5"))
            if not text:
                completion.error.CopyFrom(reward_pb2.ItemError(
                    code=reward_pb2.ERROR_CODE_INVALID_ARGUMENT, message=f"groups[{g}].completions[{i}]: is empty",
                    field=f"groups[{g}].completions[{i}]"))
            elif text == "JUDGE-ERROR":
                completion.error.CopyFrom(reward_pb2.ItemError(
                    code=reward_pb2.ERROR_CODE_INTERNAL, message="the judge failed", field=""))
            elif schedule == reward_pb2.SCHEDULE_ANCHOR:
                completion.reward = _beats(text, group.reference)
            else:
                peers = [_beats(text, texts[j]) for j in ok if j != i]
                completion.reward = sum(peers) / len(peers) if peers else 0.5
            rewards.append(completion.reward)
        compared = len(ok) > 1 or (schedule == reward_pb2.SCHEDULE_ANCHOR and ok)
        for name in rubrics:
            result.rubrics.add(rubric=name, rewards=rewards, label_mass=0.9 if compared else math.nan)
        return result

    def Score(self, request, context):
        return reward_pb2.ScoreResponse(results=[
            reward_pb2.ItemResult(id=item.id, reward=len(item.completion) / 100, scores=[
                reward_pb2.RubricScore(rubric="d", reward=len(item.completion) / 100,
                                       geval=reward_pb2.GEvalResult(label_mass=0.75))])
            for item in request.items])


@pytest.fixture(scope="module")
def judge():
    yield from serve_in_process(GroupJudge())


# --- the grouping shared with TRL -----------------------------------------------------------


def test_groups_are_found_wherever_their_members_stand():
    assert groups_by_key(["a", "b", "a", "c", "b", "a"]) == [[0, 2, 5], [1, 4], [3]]
    assert groups_by_key([]) == []
    # TRL's groupwise reward under the anchor schedule (num_generations unused) uses the same grouping ...
    assert find_groups(["p", "q", "p"], [None, None, None], None) == [[0, 2], [1]]
    assert find_groups(["p", "p", "p"], ["r1", "r2", "r1"], None) == [[0, 2], [1]]  # the reference counts


def test_a_known_group_size_cuts_each_prompts_members_and_tells_parts_apart():
    assert groups_of(["a", "b", "a", "b", "c"], 2) == ([[0, 2], [1, 3]], [[4]])
    assert groups_of(["a"] * 4, 2) == ([[0, 1], [2, 3]], [])  # two groups of one prompt, judged apart
    assert groups_of(["a", "a", "a", "b", "b"], 2) == ([[3, 4]], [[0, 1, 2]])
    # TRL's groupwise reward: a shuffled batch is grouped by prompt; two groups of one prompt are cut in
    # batch order (TRL keeps each side by side); part of a group (its rest in another process) is refused.
    assert find_groups(["p", "q", "p", "q"], [None] * 4, 2) == [[0, 2], [1, 3]]
    assert find_groups(["p"] * 4 + ["q"] * 2, [None] * 6, 2) == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError, match=r"3 completions of the prompt of completion 0.*num_generations=2.*"
                                         r"per_device_train_batch_size x steps_per_generation"):
        find_groups(["p", "p", "p", "q"], [None] * 4, 2)


def test_trl_groupwise_needs_the_group_size(judge):
    with pytest.raises(ValueError, match="num_generations .* is needed"):
        GroupwiseReward(judge.address, "a")
    with pytest.raises(ValueError, match="at least 2"):
        GroupwiseReward(judge.address, "a", num_generations=1)
    anchored = GroupwiseReward(judge.address, "a", schedule="anchor", reference_column="ref", name="geval_anchor")
    assert anchored(prompts=["P"], completions=["abc"], ref=["R"]) == [1.0]  # alone against its reference


def test_group_options_are_checked_when_configured(judge):
    with pytest.raises(ValueError, match="schedule must be one of"):
        Groupwise("round_robin")
    with pytest.raises(ValueError, match="aggregation must be one of"):
        openrlhf.make_reward_func(judge.address, "a", groupwise=True, aggregation="elo")
    with pytest.raises(ValueError, match="need groupwise"):
        openrlhf.make_reward_func(judge.address, "a", schedule="anchor")
    with pytest.raises(ValueError, match="leave mode"):
        openrlhf.make_reward_func(judge.address, "a", mode="reasoning:64", groupwise=True, n_samples_per_prompt=2)
    with pytest.raises(ValueError, match=r"n_samples_per_prompt .* is needed.*--micro_rollout_batch_size a multiple"):
        openrlhf.make_reward_func(judge.address, "a", groupwise=True)
    with pytest.raises(ValueError, match="at least 2"):
        openrlhf.make_reward_func(judge.address, "a", groupwise=True, n_samples_per_prompt=1)
    with pytest.raises(ValueError, match="it needs groupwise"):
        openrlhf.make_reward_func(judge.address, "a", n_samples_per_prompt=4)


# --- veRL: the legacy batch manager -------------------------------------------------------


def verl_batch_manager(compute_score, data_sources, solution_strs, ground_truths, extra_infos, reward_kwargs):
    """veRL's BatchRewardManager (verl/workers/reward_manager/batch.py, the same call in 0.5.0,
    0.6.1, 0.7.0 and 0.8.0): verify() calls compute_score(data_sources=, solution_strs=,
    ground_truths=, extra_infos=) with the reward_kwargs that get_custom_reward_fn
    (verl/trainer/ppo/reward.py, _call_with_kwargs) merges in, after adding
    extra_info["rollout_reward_scores"] (0.6.1 on); __call__ reads score["score"] and appends each
    key's value to that key's column of reward_extra_info."""

    def call_with_kwargs(raw_fn, extra_kwargs, **kwargs):
        return raw_fn(**{**kwargs, **extra_kwargs})

    for extra in extra_infos:
        extra["rollout_reward_scores"] = {}
    bound = partial(call_with_kwargs, compute_score, reward_kwargs)
    scores = bound(data_sources=data_sources, solution_strs=solution_strs, ground_truths=ground_truths,
                   extra_infos=extra_infos)
    rewards, columns = [], defaultdict(list)
    for score in scores:
        rewards.append(score["score"])
        for key, value in score.items():
            columns[key].append(value)
    return rewards, dict(columns)


def rollout_batch(rows, n, order):
    """veRL's trainer (verl/trainer/ppo/ray_trainer.py, 0.5.0-0.7.0): batch.repeat(rollout.n,
    interleave=True) puts each row's n samples side by side, then trainer.balance_batch (on by
    default) reorders the batch by sequence length before the reward; `order` is that reordering."""
    repeated = [(prompt, reference, completion) for prompt, reference, completions in rows
                for completion in completions[:n]]
    batch = [repeated[i] for i in order]
    return (["summeval"] * len(batch), [c for _, _, c in batch], [r for _, r, _ in batch],
            [{"prompt": p, "index": k} for k, (p, _, _) in enumerate(batch)])


ROWS = [
    ("Summarize: the council approved a library.", "A library was approved.", ["ab", "abcd", "abc"]),
    ([{"role": "user", "content": "Summarize: trains ran late."}], "Trains were late.", ["x", "xyz", "xy"]),
    ("Summarize: the council approved a library.", "Another reference.", ["abcde", "a", "ab"]),  # same prompt
]


def test_verl_groups_a_reordered_batch_and_answers_in_batch_order(judge):
    order = [4, 0, 8, 2, 6, 1, 5, 3, 7]  # as balance_batch might leave it
    batch = rollout_batch(ROWS, 3, order)
    kwargs = dict(server=judge.address, rubrics="a")
    rewards, columns = verl_batch_manager(verl.compute_score_batch_groupwise, *batch, kwargs)
    assert batch[1] == ["xyz", "ab", "ab", "abc", "abcde", "abcd", "xy", "x", "a"]
    request = judge.requests[-1]
    # One call; a group per prompt and reference (the library prompt twice, with two references),
    # members in batch order, groups in order of first appearance; a chat prompt stays messages.
    assert [list(g.completions) for g in request.groups] == [["xyz", "xy", "x"], ["ab", "abc", "abcd"],
                                                               ["ab", "abcde", "a"]]
    assert [g.reference for g in request.groups] == ["Trains were late.", "A library was approved.",
                                                    "Another reference."]
    assert request.groups[0].chat.messages[0].content == "Summarize: trains ran late."
    assert rewards == [1.0, 0.0, 0.5, 0.5, 1.0, 1.0, 0.5, 0.0, 0.0]  # each "ab" as its own group judged it
    # Every sample has the same keys as compute_score_batch's, so every column is full.
    pointwise = verl.compute_score_batch(*batch, **kwargs)
    assert set(columns) == set(pointwise[0]) == {"score", "label_mass", "failed", "score_claims_removed",
                                                 "bound_lowered", "bound_gap"}
    assert all(len(column) == 9 for column in columns.values())
    assert columns["label_mass"] == [0.9] * 9 and columns["failed"] == [0.0] * 9


def test_verl_a_group_of_one_and_a_failed_member(judge, caplog):
    batch = (["d"] * 4, ["long one", "", "mid", "alone 5/5"], ["R1", "R1", "R1", "R2"],
             [{"prompt": p} for p in ("P1", "P1", "P1", "P2")])
    rewards, columns = verl_batch_manager(
        verl.compute_score_batch_groupwise, *batch, dict(server=judge.address, on_error=-1.0))
    # The empty completion gets on_error and is left out of its group's comparisons; the sample
    # alone with its prompt gets the server's 0.5, with no verdict mass.
    assert rewards == [1.0, -1.0, 0.0, 0.5]
    assert columns == {"score": [1.0, -1.0, 0.0, 0.5], "label_mass": [0.9, 0.0, 0.9, 0.0],
                       "failed": [0.0, 1.0, 0.0, 0.0], "score_claims_removed": [0.0, 0.0, 0.0, 1.0],
                       "bound_lowered": [0.0] * 4, "bound_gap": [0.0] * 4}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_member_that_fails_its_whole_group(judge):
    """The server fails a group at its request check when one member is over --max-field-chars:
    the member gets on_error, its peers what a group of one gets."""
    result = verl.compute_score_batch_groupwise(
        ["d"] * 4, ["abc", "OVER-LIMIT", "ab", "x"], ["R"] * 4, [{"prompt": p} for p in "PPPQ"],
        server=judge.address, on_error=-1.0, rubrics=["a", "b"], rubric_keys=True)
    assert [(r["score"], r["failed"], r["label_mass"]) for r in result] == [
        (0.5, 0.0, 0.0), (-1.0, 1.0, 0.0), (0.5, 0.0, 0.0), (0.5, 0.0, 0.0)]
    assert [(r["score/a"], r["score/b"]) for r in result] == [(0.5, 0.5), (-1.0, -1.0), (0.5, 0.5), (0.5, 0.5)]


def test_group_members_name_their_completion():
    from geval_client.types import ItemError

    member = ItemError("INVALID_ARGUMENT", "groups[2].completions[5]: must not be empty", "groups[2].completions[5]")
    assert member.caused_by_completion and member.member == 5
    assert ItemError("INVALID_ARGUMENT", "", "items[0].completion").caused_by_completion
    assert not ItemError("INVALID_ARGUMENT", "", "groups[2].reference").caused_by_completion
    assert not ItemError("INTERNAL", "", "groups[2].completions[5]").caused_by_completion


def test_verl_failures_the_completion_did_not_cause_stop_the_step(judge):
    form = partial(verl.compute_score_batch_groupwise, server=judge.address)
    with pytest.raises(ItemNotScored, match="not because of its completion: the judge failed"):
        form(["d"] * 2, ["fine", "JUDGE-ERROR"], ["R", "R"], [{"prompt": "P"}] * 2)
    with pytest.raises(ItemNotScored, match=r"could not judge a group.*groups\[1\]\.reference"):
        form(["d"] * 3, ["a", "b", "c"], ["R", "MISSING", "R"], [{"prompt": "P"}, {"prompt": "Q"}, {"prompt": "P"}])
    with pytest.raises(ValueError, match=r"row 7: the sample has its own rubrics"):
        form(["d"] * 2, ["a", "b"], ["R", "R"], [{"prompt": "P", "index": 7, "rubrics": "b"}, {"prompt": "P"}])


def test_verl_validation_batches_of_single_samples_warn_and_get_half(judge, caplog):
    """veRL validates with actor_rollout_ref.rollout.val_kwargs.n=1 by default (val_before_train=true):
    every sample is alone; the run must still start, so this warns rather than raises."""
    batch = (["d"] * 2, ["a", "b"], ["R1", "R2"], [{"prompt": "P1"}, {"prompt": "P2"}])
    with caplog.at_level(logging.WARNING, logger="geval_client.trainers.verl"):
        rewards, _ = verl_batch_manager(verl.compute_score_batch_groupwise, *batch, dict(server=judge.address))
    assert rewards == [0.5, 0.5]
    assert "none of the 2 samples shares its prompt" in caplog.text and "val_kwargs.n" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="geval_client.trainers.verl"):  # against the reference: judged alone
        rewards, _ = verl_batch_manager(verl.compute_score_batch_groupwise, *batch,
                                        dict(server=judge.address, schedule="anchor"))
    assert rewards == [0.0, 0.0] and judge.requests[-1].schedule == reward_pb2.SCHEDULE_ANCHOR  # shorter than R1
    assert caplog.text == ""


def test_verl_rubric_keys_and_aggregation_reach_the_call(judge):
    batch = (["d"] * 2, ["ab", "a"], ["R", "R"], [{"prompt": "P"}] * 2)
    result = verl.compute_score_batch_groupwise(
        *batch, server=judge.address, rubrics={"a": 1, "b": 2}, rubric_keys=True, aggregation="bradley_terry")
    assert [set(r) for r in result] == [{"score", "label_mass", "failed", "score_claims_removed", "score/a",
                                         "score/b", "bound_lowered", "bound_gap"}] * 2
    assert [r["score/b"] for r in result] == [1.0, 0.0]
    assert judge.requests[-1].aggregation == reward_pb2.AGGREGATION_BRADLEY_TERRY
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['schedules'\]"):
        verl.compute_score_batch_groupwise(*batch, server=judge.address, schedules="anchor")


# --- OpenRLHF -------------------------------------------------------------------------------

CHAT = "<|im_start|>user\nSummarize: {}<|im_end|>\n<|im_start|>assistant\n"
PROMPTS = [CHAT.format(topic) for topic in ("a library.", "late trains.", "a storm.")]
LABELS = ["A library was approved.", "Trains were late.", "A storm came."]
RESPONSES = [["a", "abc", "ab", "abcd"], ["x", "xy", "xyz", "wxyz"], ["s", "stu", "st", "stuv"]]


def openrlhf_rollout(n):
    """OpenRLHF 0.8.x-0.9.0 (openrlhf/trainer/ppo_utils/experience_maker.py, generate_samples):
    each prompt and label repeated n_samples_per_prompt times side by side; the reward reads
    `query`, prompt and response decoded together (special tokens kept)."""
    prompts = sum([[p] * n for p in PROMPTS], [])
    labels = sum([[label] * n for label in LABELS], [])
    responses = sum([r[:n] for r in RESPONSES], [])
    return [p + r + "<|im_end|>" for p, r in zip(prompts, responses)], prompts, labels


def openrlhf_file_rewards(reward_func, queries, prompts, labels, micro_rollout_batch_size):
    """OpenRLHF 0.8.11 and 0.9.0 RemoteRewardModel.get_rewards (openrlhf/utils/remote_rm_utils.py)
    with a .py file: reward_func on consecutive chunks of micro_rollout_batch_size samples (Ray
    tasks there, in order here); make_experience passes the rollout batch in order unless
    --use_dynamic_batch, which regroups it by length."""
    replies = [reward_func(queries[i:i + micro_rollout_batch_size], prompts[i:i + micro_rollout_batch_size],
                           labels[i:i + micro_rollout_batch_size])
               for i in range(0, len(queries), micro_rollout_batch_size)]
    return sum([reply["rewards"] for reply in replies], [])


def test_openrlhf_chunks_of_whole_groups(judge, caplog):
    reward_func = openrlhf.make_reward_func(judge.address, "a", groupwise=True, n_samples_per_prompt=4)
    queries, prompts, labels = openrlhf_rollout(4)
    rewards = openrlhf_file_rewards(reward_func, queries, prompts, labels, micro_rollout_batch_size=4)
    assert rewards == [0.0, 2 / 3, 1 / 3, 1.0, 0.0, 1 / 3, 2 / 3, 1.0, 0.0, 2 / 3, 1 / 3, 1.0]
    assert [list(g.completions) for g in judge.requests[-1].groups] == [["s", "stu", "st", "stuv"]]
    assert judge.requests[-1].groups[0].reference == "A storm came."
    reply = reward_func(queries, prompts, labels)  # the bridge's request: the whole batch
    assert reply["rewards"] == reply["scores"] == rewards
    assert reply["extra_logs"] == {"geval_label_mass": [0.9] * 12, "geval_failed": [0.0] * 12,
                                   "geval_score_claims_removed": [0.0] * 12, "geval_bound_lowered": [0.0] * 12,
                                   "geval_bound_gap": [0.0] * 12}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_openrlhf_a_chunk_that_cuts_a_group_is_refused(judge, caplog):
    """A reward_func's chunks are Ray tasks in other processes: a cut group's pieces cannot be joined, so a
    chunk holding part of a group stops the step, logged at ERROR, naming the flags that keep groups whole."""
    queries, prompts, labels = openrlhf_rollout(2)
    reward_func = openrlhf.make_reward_func(judge.address, "a", groupwise=True, n_samples_per_prompt=2)
    with pytest.raises(ValueError, match=r"1 of its 3 samples with the prompt of sample 2.*n_samples_per_prompt=2"):
        openrlhf_file_rewards(reward_func, queries, prompts, labels, micro_rollout_batch_size=3)
    assert any(r.levelname == "ERROR" and "--micro_rollout_batch_size a multiple of --n_samples_per_prompt"
               in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match="none of the 1 samples"):  # a lone sample at the end of the batch
        openrlhf_file_rewards(reward_func, queries[:5], prompts[:5], labels[:5], micro_rollout_batch_size=4)
    queries, prompts, labels = openrlhf_rollout(4)
    reward_func = openrlhf.make_reward_func(judge.address, "a", groupwise=True, n_samples_per_prompt=4)
    with pytest.raises(ValueError, match=r"2 of its 2 samples with the prompt of sample 0, not a "
                                         r"multiple of n_samples_per_prompt=4"):  # every group halved
        openrlhf_file_rewards(reward_func, queries, prompts, labels, micro_rollout_batch_size=2)
    requests = len(judge.requests)
    assert openrlhf_file_rewards(reward_func, queries, prompts, labels, micro_rollout_batch_size=8)[:4] == [
        0.0, 2 / 3, 1 / 3, 1.0]  # chunks of two whole groups
    assert len(judge.requests) == requests + 2


def test_openrlhf_two_groups_of_one_prompt_are_judged_apart(judge):
    prompt = PROMPTS[0]
    reward_func = openrlhf.make_reward_func(judge.address, "a", groupwise=True, n_samples_per_prompt=2)
    queries = [prompt + text + "<|im_end|>" for text in ("a", "abc", "ab", "abcd")]
    assert reward_func(queries, [prompt] * 4, ["R"] * 4)["rewards"] == [0.0, 1.0, 0.0, 1.0]
    assert [list(g.completions) for g in judge.requests[-1].groups] == [["a", "abc"], ["ab", "abcd"]]


def test_openrlhf_one_sample_per_call_is_refused(judge, caplog):
    """OpenRLHF 0.9.1-0.11 (openrlhf/utils/agent.py, SingleTurnAgentExecutor.execute): one
    reward_func([query], [prompt], [label]) per sample; what it raises is logged at INFO and the
    reward left None, so the cause is logged here at ERROR."""
    reward_func = openrlhf.make_reward_func(judge.address, "a", groupwise=True, n_samples_per_prompt=2)
    queries, prompts, labels = openrlhf_rollout(2)
    with pytest.raises(ValueError, match="OpenRLHF 0.9.1 and later call a reward with one sample"):
        reward_func(queries[:1], prompts[:1], labels[:1])
    assert any(r.levelname == "ERROR" and "none of the 1 samples" in r.getMessage() for r in caplog.records)
    anchored = openrlhf.make_reward_func(judge.address, "a", groupwise=True, schedule="anchor")
    assert anchored(queries[:1], prompts[:1], labels[:1])["rewards"] == [0.0]  # "a" against its label, longer
    assert reward_func([], [], [])["rewards"] == []


def test_openrlhf_failed_members(judge):
    reward_func = openrlhf.make_reward_func(judge.address, "a", on_error=-0.5, groupwise=True, n_samples_per_prompt=3)
    prompt = PROMPTS[0]
    queries = [prompt + text + "<|im_end|>" for text in ("abc", "<|im_end|>", "a")]
    reply = reward_func(queries, [prompt] * 3, ["R"] * 3)
    assert reply["rewards"] == [1.0, -0.5, 0.0] and reply["scores"] == [1.0, 0.0, 0.0]
    assert reply["extra_logs"]["geval_failed"] == [0.0, 1.0, 0.0]
    with pytest.raises(ItemNotScored, match="could not judge a group"):
        reward_func(queries[:1] * 3, [prompt] * 3, ["MISSING"] * 3)


def test_the_bridge_groups_a_reordered_batch(judge):
    """OpenRLHF 0.8.x-0.9.0 with an HTTP URL (remote_rm_utils.py, remote_rm_fn_ray): one request per
    server holding its share of the batch, so with one server the whole batch, in the order
    make_experience gives it (with --use_dynamic_batch, regrouped by length)."""
    scorer = SampleScorer.configure(judge.address, "a")
    reward = openrlhf.OpenRLHFReward(scorer, groupwise=Groupwise(), n_samples_per_prompt=2)
    server = openrlhf_bridge.serve(reward, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/get_reward"
    try:
        queries, prompts, labels = openrlhf_rollout(2)
        order = [3, 0, 2, 1]  # "xy", "a", "x", "abc"
        status, reply = _post(url, {"query": [queries[i] for i in order], "prompts": [prompts[i] for i in order],
                                    "labels": [labels[i] for i in order]})
        assert status == 200 and reply["rewards"] == [1.0, 0.0, 0.0, 1.0]
        status, reply = _post(url, {"query": queries[:1], "prompts": prompts[:1], "labels": labels[:1]})
        assert status == 400 and "one sample at a time" in reply["error"]
    finally:
        server.shutdown()
        server.server_close()


def _post(url, payload):
    request = urllib.request.Request(url, json.dumps(payload).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_bridge_takes_groupwise_flags(judge):
    with pytest.raises(SystemExit):
        openrlhf_bridge.main(["--server", judge.address, "--schedule", "anchor", "--port", "0"])
    with pytest.raises(SystemExit):
        openrlhf_bridge.main(["--server", judge.address, "--groupwise", "--schedule", "bogus", "--port", "0"])
    with pytest.raises(SystemExit):  # the size of a group is needed to tell part of one
        openrlhf_bridge.main(["--server", judge.address, "--groupwise", "--port", "0"])
    with pytest.raises(SystemExit):
        openrlhf_bridge.main(["--server", judge.address, "--n-samples-per-prompt", "4", "--port", "0"])


def test_every_trainer_gives_an_over_long_member_on_error(judge):
    """The server fails a whole group for one member over --max-field-chars: TRL's groupwise reward,
    veRL's batch form and OpenRLHF's reward_func give that member the same on_error, its peers 0.5."""
    texts = ["abc", "OVER-LIMIT", "ab"]
    trl = GroupwiseReward(judge.address, "a", num_generations=3, on_error=-1.0, name="geval_groupwise_over_long")
    verl_rewards = [r["score"] for r in verl.compute_score_batch_groupwise(
        ["d"] * 3, texts, ["R"] * 3, [{"prompt": PROMPTS[0]}] * 3, server=judge.address, rubrics="a", on_error=-1.0)]
    reward_func = openrlhf.make_reward_func(judge.address, "a", on_error=-1.0, groupwise=True, n_samples_per_prompt=3)
    openrlhf_rewards = reward_func([PROMPTS[0] + t + "<|im_end|>" for t in texts], [PROMPTS[0]] * 3, ["R"] * 3)
    assert trl(prompts=[PROMPTS[0]] * 3, completions=texts) == verl_rewards == openrlhf_rewards["rewards"] == [
        0.5, -1.0, 0.5]
