"""Each row's own rubric from the data (TRL's rubric_column, the key of OpenRLHF's label
object and of veRL's extra_info), against a scripted gRPC server on loopback that records
what it was sent: the rubric travels on the row's items, a row without one keeps the
reward's rubrics, rows read back from Arrow (Hugging Face datasets) work, and errors
name the column and the row. tests/engine/test_inline_rubrics.py scores the same
through the real server."""

from __future__ import annotations

import logging

import datasets
import pytest
from geval_client import GEvalReward, openrlhf, verl
from geval_client.errors import ItemNotScored
from geval_client.pb import reward_pb2, reward_pb2_grpc

from tests.unit.fakes import serve_in_process

CLARITY = {
    "name": "clarity", "criterion": "Clarity",
    "task_introduction": "You will be given a question and one answer to it.",
    "evaluation_criteria": "Clarity (1-5) - how easy the answer is to read.",
    "scale": {"min": 1, "max": 5},
}
BREVITY = {**CLARITY, "name": "brevity", "criterion": "Brevity", "evaluation_steps": "1. Count the words.",
           "scale": {"min": 1, "max": 3, "higher_is_better": False}}


class ScriptedJudge(reward_pb2_grpc.RewardServiceServicer):
    """Scores 0.5 and records each request; an item whose own rubric has an empty
    criterion fails naming that field, as the real server does."""

    def __init__(self) -> None:
        self.requests: list[reward_pb2.ScoreRequest] = []

    def Score(self, request, context):
        self.requests.append(request)
        results = []
        for i, item in enumerate(request.items):
            result = reward_pb2.ItemResult(id=item.id)
            if any(r.HasField("spec") and not r.spec.criterion for r in item.rubrics):
                field = f"items[{i}].rubrics[0].spec.criterion"
                result.error.CopyFrom(reward_pb2.ItemError(
                    code=reward_pb2.ERROR_CODE_INVALID_ARGUMENT, field=field,
                    message=f"{field}: field 'criterion' is required and must be a non-empty string"))
            else:
                result.reward = 0.5
                result.scores.append(reward_pb2.RubricScore(reward=0.5, geval=reward_pb2.GEvalResult(label_mass=0.9)))
            results.append(result)
        return reward_pb2.ScoreResponse(results=results)


@pytest.fixture(scope="module")
def judge():
    yield from serve_in_process(ScriptedJudge())


def own_rubrics(request: reward_pb2.ScoreRequest) -> list[list[str]]:
    """Per item, its own rubrics by name (an inline one by its spec's name)."""
    return [[r.name or r.spec.name for r in item.rubrics] for item in request.items]


# --- TRL -----------------------------------------------------------------------------------


def test_each_row_is_scored_with_the_rubric_its_column_holds(judge):
    rows = datasets.Dataset.from_list([  # Arrow gives every row every key, None where absent
        {"prompt": "Q1", "criteria": CLARITY},
        {"prompt": "Q2", "criteria": BREVITY},
        {"prompt": "Q3", "criteria": None},
    ])[:]
    assert rows["criteria"][0]["evaluation_steps"] is None and rows["criteria"][0]["scale"]["higher_is_better"] is None
    reward = GEvalReward(judge.address, "summeval-coherence", rubric_column="criteria")
    assert reward.__name__ == "geval_criteria"
    rewards = reward(prompts=rows["prompt"], completions=["A1", "A2", "A3"], criteria=rows["criteria"])
    assert rewards == [0.5, 0.5, 0.5]
    request = judge.requests[-1]
    assert [r.name for r in request.rubrics] == ["summeval-coherence"]  # for the row without its own
    assert own_rubrics(request) == [["clarity"], ["brevity"], []]
    clarity, brevity = request.items[0].rubrics[0].spec, request.items[1].rubrics[0].spec
    assert not clarity.HasField("evaluation_steps") and not clarity.scale.HasField("higher_is_better")
    assert (brevity.evaluation_steps, brevity.scale.max, brevity.scale.higher_is_better) == ("1. Count the words.", 3,
                                                                                             False)


def test_a_column_of_served_names_and_a_missing_column(judge):
    reward = GEvalReward(judge.address, rubric_column="rubric_name")
    reward(prompts=["Q1", "Q2"], completions=["A", "B"], rubric_name=["summeval-fluency", "reference-match"])
    assert own_rubrics(judge.requests[-1]) == [["summeval-fluency"], ["reference-match"]]
    with pytest.raises(ValueError, match="column 'rubric_name' is not in the dataset"):
        reward(prompts=["Q1"], completions=["A"], criteria=[CLARITY])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (42, "column 'criteria' row 1: a rubric is a rubric dict or the name of a served rubric, got int"),
        ({**CLARITY, "rubric": "x"}, r"column 'criteria' row 1: unknown rubric field\(s\) \['rubric'\]"),
        ({**CLARITY, "scale": 5}, "column 'criteria' row 1: rubric field 'scale' must be a dict .* got int"),
    ],
)
def test_a_value_that_is_no_rubric_is_refused_naming_the_column_and_the_row(judge, value, message):
    reward = GEvalReward(judge.address, rubric_column="criteria", name="refusing")
    with pytest.raises(ValueError, match=message):
        reward(prompts=["Q1", "Q2"], completions=["A", "B"], criteria=[CLARITY, value])


def test_a_rubric_the_server_refuses_fails_its_rows_alone_named_by_column_and_row(judge, caplog):
    reward = GEvalReward(judge.address, rubric_column="criteria", name="bad_rubric_rows")
    extra: dict[str, list] = {}
    with caplog.at_level(logging.WARNING, logger="geval_client.trainers.trl"):
        rewards = reward(prompts=["Q1", "Q1", "Q2", "Q2"], completions=["A", "B", "C", "D"],
                         criteria=[CLARITY, CLARITY, {**CLARITY, "criterion": ""}, {**CLARITY, "criterion": ""}],
                         log_extra=lambda key, values: extra.setdefault(key, values))
    assert rewards == [0.5, 0.5, None, None]  # the data's fault: excluded, whatever on_error says
    assert "first: column 'criteria' row 2: items[2].rubrics[0].spec.criterion: field 'criterion'" in caplog.text
    assert extra["bad_rubric_rows/error"][3].startswith("column 'criteria' row 3: items[3].rubrics[0].spec")


def test_rows_of_one_prompt_with_different_rubrics_are_different_groups(judge):
    """exclude stands a failed completion in with its group's mean: the group is the row,
    and a row's rubric is part of it."""
    reward = GEvalReward(judge.address, rubric_column="criteria", on_error="exclude", name="grouped")
    rewards = reward(prompts=["Q"] * 3, completions=["A", "B", "C"],
                     criteria=[CLARITY, {**CLARITY, "criterion": ""}, BREVITY])
    assert rewards == [0.5, None, 0.5]


def test_rewards_reading_different_columns_score_differently(judge):
    keep = GEvalReward(judge.address, rubric_column="criteria", name="by_column")  # noqa: F841
    with pytest.raises(ValueError, match="both named 'by_column'"):
        GEvalReward(judge.address, rubric_column="other", name="by_column")


# --- OpenRLHF: the label object's key ------------------------------------------------------

PROMPT = "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"


def test_openrlhf_label_objects_carry_each_samples_rubric(judge):
    reward = openrlhf.make_reward_func(judge.address, "summeval-coherence", rubric_column="criteria")
    labels = [{"reference": "R", "criteria": CLARITY}, '{"criteria": "summeval-fluency"}', "just a reference"]
    reply = reward([PROMPT + "A<|im_end|>"] * 3, [PROMPT] * 3, labels)
    assert reply["rewards"] == [0.5, 0.5, 0.5]
    assert own_rubrics(judge.requests[-1]) == [["clarity"], ["summeval-fluency"], []]
    with pytest.raises(ValueError, match=r"unknown keys \['rubrics'\]; a label object sets prompt, reference, crit"):
        reward([PROMPT + "A"], [PROMPT], [{"rubrics": "summeval-fluency"}])
    with pytest.raises(ValueError, match="label\\['criteria'\\] row 1: a rubric is a rubric dict"):
        reward([PROMPT + "A"] * 2, [PROMPT] * 2, [{}, {"criteria": 3.5}])
    with pytest.raises(ItemNotScored, match=r"completion: label\['criteria'\] row 0: items\[0\].rubrics\[0\].spec"):
        reward([PROMPT + "A"], [PROMPT], [{"criteria": {**CLARITY, "criterion": ""}}])


# --- veRL: the key of extra_info ------------------------------------------------------------


def test_verl_extra_info_carries_each_samples_rubric(judge):
    options = {"server": judge.address, "rubric_column": "criteria"}
    infos = [{"prompt": "Q", "index": 7, "criteria": CLARITY}, {"prompt": "Q", "index": 8, "criteria": None}]
    scores = verl.compute_score_batch(["d"] * 2, ["A", "B"], [None, None], infos, **options)
    assert [s["score"] for s in scores] == [0.5, 0.5]
    assert own_rubrics(judge.requests[-1]) == [["clarity"], []]
    named = verl.compute_score("d", "A", None, {"prompt": "Q", "criteria": "summeval-fluency"}, **options)
    assert named["score"] == 0.5
    assert own_rubrics(judge.requests[-1]) == [["summeval-fluency"]]
    with pytest.raises(ValueError, match=r"extra_info\['criteria'\] row 7: a rubric is a rubric dict .* got bool"):
        verl.compute_score("d", "A", None, {**infos[0], "criteria": True}, **options)
    with pytest.raises(ItemNotScored, match=r"extra_info\['criteria'\] row 8: items\[1\]\.rubrics\[0\]\.spec\.crit"):
        verl.compute_score_batch(["d"] * 2, ["A", "B"], [None, None],
                                 [infos[0], {**infos[1], "criteria": {**CLARITY, "criterion": ""}}], **options)
