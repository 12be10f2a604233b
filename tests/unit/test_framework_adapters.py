"""The OpenRLHF and veRL adapters without the engine: cutting the completion out of
OpenRLHF's query, reading labels and extra_info, and the reward contract (a number
for every sample, never None; failures the completion did not cause raise) against
a scripted gRPC server on loopback. tests/engine/test_framework_adapters.py runs
them against the real server the way each framework calls them."""

from __future__ import annotations

import asyncio
import pickle
from concurrent import futures

import grpc
import pytest
from geval_client import openrlhf, verl
from geval_client.errors import ItemNotScored
from geval_client.pb import reward_pb2, reward_pb2_grpc
from geval_client.sample_rewards import SampleScorer, rubrics_from_text

PROMPT = "<|im_start|>user\nSummarize: the council approved a library.<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize(
    "query, prompt, completion",
    [
        (PROMPT + "A library was approved.<|im_end|>", PROMPT, "A library was approved."),
        (PROMPT + "Approved.<|im_end|><|endoftext|>", PROMPT, "Approved."),
        ("<s> [INST] Summarize. [/INST] It is short.</s>", "<s>[INST] Summarize. [/INST]", "It is short."),
        (PROMPT[-80:] + "Kept the tail.<|eot_id|>", "x" * 500 + PROMPT[-80:], "Kept the tail."),  # left-truncated
        ("Question?\nAnswer <b>bold</b> <|im_end|>", "Question?\n", "Answer <b>bold</b>"),
    ],
)
def test_the_completion_is_cut_out_of_the_query(query, prompt, completion):
    assert openrlhf.completion_from_query(query, prompt) == completion


def test_a_query_that_does_not_hold_its_prompt_is_refused():
    with pytest.raises(ValueError, match="query does not start with its prompt"):
        openrlhf.completion_from_query("Something else entirely.", "Summarize: the council approved a library.")


def test_labels_are_references_or_json_objects():
    assert openrlhf.label_fields("The reference.") == {"reference": "The reference."}
    assert openrlhf.label_fields('{"prompt": "Article.", "reference": "R", "rubrics": {"a": 2}}') == {
        "prompt": "Article.", "reference": "R", "rubrics": {"a": 2},
    }
    assert openrlhf.label_fields("{not json") == {"reference": "{not json"}
    with pytest.raises(ValueError, match=r"unknown keys \['answer'\]"):
        openrlhf.label_fields({"answer": "42"})


def test_rubrics_from_the_environment_or_a_command_line():
    assert rubrics_from_text("a, b:2") == {"a": 1.0, "b": 2.0}
    assert rubrics_from_text("") == {}
    with pytest.raises(ValueError, match="rubric weight: expected a number"):
        rubrics_from_text("a:heavy")


# --- the reward contract, against a scripted judge -------------------------------------


class ScriptedJudge(reward_pb2_grpc.RewardServiceServicer):
    """Reward len(completion)/100 with rubric weights recorded; an empty completion fails
    for its own reason, a reference "MISSING" like a missing reference."""

    def __init__(self) -> None:
        self.requests: list[reward_pb2.ScoreRequest] = []

    def Score(self, request, context):
        self.requests.append(request)
        results = []
        for i, item in enumerate(request.items):
            result = reward_pb2.ItemResult(id=item.id)
            if not item.completion:
                result.error.CopyFrom(reward_pb2.ItemError(
                    code=reward_pb2.ERROR_CODE_INVALID_ARGUMENT, message=f"items[{i}].completion: must not be empty",
                    field=f"items[{i}].completion"))
            elif item.reference == "MISSING":
                result.error.CopyFrom(reward_pb2.ItemError(
                    code=reward_pb2.ERROR_CODE_INVALID_ARGUMENT, message=f"items[{i}].reference: is required",
                    field=f"items[{i}].reference"))
            else:
                result.reward = len(item.completion) / 100
                result.scores.append(reward_pb2.RubricScore(
                    reward=result.reward, geval=reward_pb2.GEvalResult(label_mass=0.75)
                ))
            results.append(result)
        return reward_pb2.ScoreResponse(results=results)


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    service = ScriptedJudge()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    reward_pb2_grpc.add_RewardServiceServicer_to_server(service, server)
    service.address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    yield service
    server.stop(grace=None)


def test_openrlhf_reward_func_reads_its_configuration_from_the_environment(judge, monkeypatch):
    monkeypatch.setenv("GEVAL_REWARD_SERVER", judge.address)
    monkeypatch.setenv("GEVAL_REWARD_RUBRICS", "a:1,b:3")
    reply = openrlhf.reward_func([PROMPT + "Twelve chars<|im_end|>", PROMPT + "<|im_end|>"], [PROMPT] * 2, ["R", "R"])
    assert reply == {
        "rewards": [0.12, 0.0], "scores": [0.12, 0.0],
        "extra_logs": {"geval_label_mass": [0.75, 0.0], "geval_failed": [0.0, 1.0],
                       "geval_score_claims_removed": [0.0, 0.0]},
    }
    assert [(r.name, r.weight) for r in judge.requests[-1].rubrics] == [("a", 1.0), ("b", 3.0)]
    assert judge.requests[-1].items[0].reference == "R"


def test_a_failure_the_completion_did_not_cause_raises_instead_of_a_made_up_number(judge):
    reward = openrlhf.OpenRLHFReward(SampleScorer.configure(judge.address, "a"))
    with pytest.raises(ItemNotScored, match="not because of its completion: items.0..reference"):
        reward([PROMPT + "Fine."], [PROMPT], ["MISSING"])


def test_exclude_is_refused_where_every_sample_needs_a_number(judge):
    with pytest.raises(ValueError, match="use on_error='min' or a float"):
        SampleScorer.configure(judge.address, "a", on_error="exclude")


def test_verl_forms_return_a_dict_with_a_float_score_and_fixed_keys(judge):
    options = dict(server=judge.address, rubrics="a", on_error=-1.0)
    extra = {"prompt": [{"role": "user", "content": "Summarize."}], "index": 3}
    sync = verl.compute_score("summeval", "Ten chars!", "reference", extra, **options, reward_router_address=None)
    assert sync == {"score": 0.1, "label_mass": 0.75, "failed": 0.0, "score_claims_removed": 0.0}
    failed = asyncio.run(verl.compute_score_async("summeval", "", None, extra, **options))
    assert failed == {"score": -1.0, "label_mass": 0.0, "failed": 1.0, "score_claims_removed": 0.0}
    batch = verl.compute_score_batch(
        ["d"] * 3, ["abc", "", "abcd"], ["g", None, 42],
        [extra, extra, {**extra, "rubrics": {"b": 2.0, "c": None}}], **options,  # c: a parquet struct's absent key
    )
    assert [r["score"] for r in batch] == [0.03, -1.0, 0.04]
    request = judge.requests[-1]  # one request; a sample's own rubrics travel on its item
    assert [r.name for r in request.rubrics] == ["a"]
    assert [[(r.name, r.weight) for r in item.rubrics] for item in request.items] == [[], [], [("b", 2.0)]]
    assert [item.reference if item.HasField("reference") else None for item in request.items] == ["g", None, None]


def test_verl_names_the_missing_prompt(judge):
    with pytest.raises(ValueError, match=r"extra_info\['question'\] must hold .* extra_info has \['index'\]"):
        verl.compute_score("d", "text", None, {"index": 1}, server=judge.address, prompt_key="question")


def test_the_adapters_pickle():
    for function in (openrlhf.reward_func, verl.compute_score, verl.compute_score_async, verl.compute_score_batch):
        assert pickle.loads(pickle.dumps(function)) is function
    reward = openrlhf.OpenRLHFReward(SampleScorer.configure("judge:50051", {"a": 1}))
    assert pickle.loads(pickle.dumps(reward)) == reward
