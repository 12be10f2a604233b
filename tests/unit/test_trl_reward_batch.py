"""Pure logic of the TRL reward function: TRL's inputs to Score items, results to
rewards and diagnostics. Results here are hand-made protos; the real server is
exercised in test_trl_reward.py."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from geval_client.pb import reward_pb2
from geval_client.trainers.shared.diagnostics import average_ranks, batch_metrics, spearman
from geval_client.trainers.shared.trainer_text import completion_text, judge_prompt
from geval_client.trainers.shared.trl_batch import build_batch, rewards_of
from geval_client.types import item_result
from scipy.stats import spearmanr


def test_importing_the_client_loads_no_torch_vllm_or_trl():
    code = (
        "import sys, geval_client\n"
        "from geval_client import GEvalReward, AsyncGEvalReward, openrlhf, openrlhf_bridge, verl\n"
        "heavy = ('torch', 'vllm', 'trl', 'transformers', 'openrlhf', 'verl', 'ray')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_standard_format_maps_one_item_per_completion():
    batch = build_batch(["P1", "P1"], ["c one", "c two!"], None, {})
    assert [(item.text, item.completion, item.id) for item in batch.items] == [
        ("P1", "c one", "0"), ("P1", "c two!", "1"),
    ]
    assert not batch.items[0].HasField("reference")
    assert batch.lengths == [5, 6]  # characters without completion ids
    assert batch.reference_items == [None, None]


def test_conversational_format_keeps_roles_and_takes_the_assistant_text():
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    completion = [{"role": "assistant", "content": "Hello!"}]
    batch = build_batch([prompt], [completion], [[7, 8, 9]], {})
    item = batch.items[0]
    assert [(m.role, m.content) for m in item.chat.messages] == [("system", "Be brief."), ("user", "Hi")]
    assert item.completion == "Hello!"
    assert batch.lengths == [3]  # tokens, from TRL's completion ids
    assert completion_text(completion) == completion_text("Hello!")
    assert judge_prompt("plain") == "plain"


def test_source_column_replaces_the_policy_prompt_for_the_judge():
    batch = build_batch(["Summarize: ARTICLE"], ["s"], None, {"article": ["ARTICLE"]}, source_column="article")
    assert batch.items[0].text == "ARTICLE"


def test_reference_column_reaches_items_and_each_distinct_reference_is_scored_once():
    columns = {"reference": ["R1", "R1", "R2", None], "other": [1, 2, 3, 4]}
    batch = build_batch(["P1", "P1", "P2", "P3"], ["a", "b", "c", "d"], None, columns, reference_column="reference")
    references = [item.reference if item.HasField("reference") else None for item in batch.items[:4]]
    assert references == ["R1", "R1", "R2", None]
    assert batch.completions == 4
    assert [(item.text, item.completion) for item in batch.items[4:]] == [("P1", "R1"), ("P2", "R2")]
    assert not batch.items[4].HasField("reference")  # a reference is not judged against itself
    assert batch.reference_items == [4, 4, 5, None]
    unscored = build_batch(
        ["P1"], ["a"], None, {"reference": ["R1"]}, reference_column="reference", score_references=False
    )
    assert len(unscored.items) == 1 and unscored.reference_items == [None]


def test_a_missing_or_bad_column_is_named():
    named = r"column 'reference' is not in the dataset; columns passed by the trainer: \['answer'\]"
    with pytest.raises(ValueError, match=named):
        build_batch(["P"], ["c"], None, {"answer": ["x"], "log_metric": print}, reference_column="reference")
    with pytest.raises(ValueError, match="column 'reference' row 1: a reference must be a string, got int"):
        build_batch(["P", "P"], ["c", "d"], None, {"reference": ["x", 3]}, reference_column="reference")
    with pytest.raises(ValueError, match="2 prompts but 1 completions"):
        build_batch(["P", "P"], ["c"], None, {})


def result(reward=None, label_mass=0.9, low=False, error=None, claims=0):
    item = reward_pb2.ItemResult(score_claims_removed=claims)
    if error:
        item.error.CopyFrom(reward_pb2.ItemError(code=reward_pb2.ERROR_CODE_INVALID_ARGUMENT, message=error))
    else:
        item.reward = reward
        item.scores.append(reward_pb2.RubricScore(
            reward=reward, geval=reward_pb2.GEvalResult(label_mass=label_mass, low_confidence=low)
        ))
    return item_result(item)  # as the client hands it back


def test_failed_items_become_none_never_zero():
    results = [result(0.4), result(error="items[1].completion: must not be empty"), result(0.0)]
    assert rewards_of(results, 3) == [0.4, None, 0.0]


def test_diagnostics_from_a_batch_with_references():
    columns = {"reference": ["R1", "R1", "R1", "R2"]}
    batch = build_batch(["P1"] * 3 + ["P2"], ["a", "bb", "ccc", "dddd"], None, columns, reference_column="reference")
    results = [
        result(0.2, label_mass=0.8), result(0.6, label_mass=0.4, low=True), result(0.9, label_mass=0.6, claims=2),
        result(error="scripted"),
        result(0.5),  # reference R1
        result(0.3),  # reference R2, whose only completion failed
    ]
    metrics = batch_metrics(batch, results, latency_s=1.5)
    assert metrics["latency_s"] == 1.5
    assert metrics["failed_share"] == 0.25
    assert metrics["score_claim_share"] == 0.25
    assert metrics["label_mass"] == pytest.approx(0.6)
    assert metrics["low_confidence_share"] == pytest.approx(1 / 3)
    assert metrics["self_preference_share"] == pytest.approx(2 / 3)
    assert metrics["self_preference_margin"] == pytest.approx(((0.2 - 0.5) + (0.6 - 0.5) + (0.9 - 0.5)) / 3)
    assert "length_spearman" not in metrics  # 3 scored completions: too few for a rank correlation


def test_diagnostics_leave_out_what_cannot_be_measured():
    batch = build_batch(["P", "P"], ["a", "b"], None, {})
    metrics = batch_metrics(batch, [result(0.5), result(error="x")], latency_s=0.1)
    assert set(metrics) == {"latency_s", "failed_share", "score_claim_share", "label_mass", "low_confidence_share",
                            "bound_lowered_share", "bound_gap", "bound_lowered_share/", "bound_gap/"}


@pytest.mark.parametrize("seed", range(5))
def test_spearman_matches_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 5, size=12).astype(float)
    y = x + rng.integers(-2, 3, size=12)
    assert spearman(list(x), list(y)) == pytest.approx(spearmanr(x, y).statistic)


def test_spearman_is_undefined_for_constant_or_tiny_samples():
    assert spearman([1.0, 2.0], [3.0, 3.0]) is None
    assert spearman([1.0], [2.0]) is None
    assert list(average_ranks([10, 20, 20, 5])) == [2.0, 3.5, 3.5, 1.0]


def test_completions_are_grouped_by_their_row_not_by_the_prompt_alone():
    columns = {"reference": ["R1", "R1", "R2", "R2"]}
    batch = build_batch(["P"] * 4, ["a", "b", "c", "d"], None, columns, reference_column="reference")
    assert batch.groups[0] == batch.groups[1] != batch.groups[2] == batch.groups[3]
