"""The reward-model scorer's logic with a fake classifier and chat: its two reward forms, heads,
one read per distinct chat, over-long items, groups, the engines' memory split and the fit."""

from __future__ import annotations

import asyncio
import math

import pytest
from geval_audit.reward_model_fit import FitError, fit
from geval_server.engine.chat_template import ChatRefused
from geval_server.engine.defaults import (
    CLASSIFIER_CPU_KV_CACHE_BYTES,
    CPU,
    GPU,
    classifier_defaults,
    split_memory,
)
from geval_server.engine.dtype import DtypeChoice
from geval_server.groupwise.plan import Group
from geval_server.scorers.base import ItemFailure, JudgeInput
from geval_server.scorers.reward_model.checkpoint import Checkpoint
from geval_server.scorers.reward_model.groups import judge_groups
from geval_server.scorers.reward_model.scorer import Calibration, RewardModelScorer, sigmoid
from geval_server.scorers.scoring_mode import Logprobs


class FakeChat:
    """One id per character of the rendered chat (`role:content|...`)."""

    template, trims = "fake", False

    def ids(self, chat) -> list[int]:
        return [ord(c) for c in "|".join(f"{role}:{content}" for role, content in chat)]


class FakeClassifier:
    """Two heads: the chat's length / 10 and its negation; counts what it reads."""

    model, dtype, max_model_len = "fake-rm", "float32", 200

    def __init__(self) -> None:
        self.read: list[tuple[int, ...]] = []

    async def classify(self, prompts):
        self.read += [tuple(p) for p in prompts]
        return [[len(p) / 10, -len(p) / 10] for p in prompts]


def scorer(head: int = 0, calibration: Calibration | None = None) -> tuple[RewardModelScorer, FakeClassifier]:
    engine = FakeClassifier()
    checkpoint = Checkpoint("fake-rm", "LlamaForSequenceClassification", ("helpful", "harmless"), head)
    return RewardModelScorer(engine, checkpoint, FakeChat(), calibration or Calibration()), engine


def score(rm: RewardModelScorer, items: list[JudgeInput]):
    requests = [rm.request(item, f"items[{i}]") for i, item in enumerate(items)]
    return asyncio.run(rm.score(requests, Logprobs()))


def test_the_reference_form_is_the_bradley_terry_probability_of_both_reads():
    rm, _ = scorer()
    (result,) = score(rm, [JudgeInput("Q?", "a longer answer", "short")])
    raw, ref = len("user:Q?|assistant:a longer answer") / 10, len("user:Q?|assistant:short") / 10
    assert (result.raw_score, result.reference_raw_score, result.form) == (raw, ref, "reference")
    assert result.reward == sigmoid(raw - ref)
    assert result.wire()["reward_model"]["heads"] == {"helpful": raw, "harmless": -raw}


def test_the_calibrated_form_centres_and_scales_the_chosen_head():
    rm, _ = scorer(head=1, calibration=Calibration(center=-2.0, scale=0.5))
    (result,) = score(rm, [JudgeInput("Q?", "answer")])
    raw = -len("user:Q?|assistant:answer") / 10
    assert (result.raw_score, result.reference_raw_score, result.form) == (raw, None, "calibrated")
    assert result.reward == pytest.approx(sigmoid((raw + 2.0) / 0.5), abs=1e-15)


def test_a_chat_prompt_stays_a_chat_and_each_distinct_chat_is_read_once():
    rm, engine = scorer()
    chat = (("system", "Be brief."), ("user", "Q?"))
    items = [JudgeInput("flattened", "a", "b", chat=chat), JudgeInput("flattened", "a", chat=chat)]
    score(rm, items)
    assert sorted(engine.read) == sorted({tuple(FakeChat().ids([*chat, ("assistant", text)])) for text in "ab"})


def test_an_over_long_chat_fails_its_item_naming_the_field_and_the_limit():
    rm, _ = scorer()
    with pytest.raises(ItemFailure, match="over its max_model_len of 200") as failure:
        rm.request(JudgeInput("Q?", "fine", "x" * 300), "items[4]")
    assert failure.value.field == "items[4].reference"


def test_the_content_hash_covers_the_calibration():
    assert scorer()[0].content_hash != scorer(calibration=Calibration(0.0, 2.0))[0].content_hash
    assert scorer()[0].content_hash != scorer(head=1)[0].content_hash


def test_groups_reward_the_mean_probability_of_beating_each_peer():
    rm, engine = scorer()
    completions = ["aa", "a", "aaaa", "aa", "x" * 300]
    (result,) = asyncio.run(judge_groups([Group("Q?", completions)], [(rm, 1.0)], Logprobs(), dry_run=False))
    raw = [len(f"user:Q?|assistant:{c}") / 10 for c in completions[:4]]
    expected = [sum(sigmoid(raw[i] - raw[j]) for j in range(4) if j != i) / 3 for i in range(4)]
    assert result.rewards[:4] == pytest.approx(expected, abs=1e-15)
    assert result.member_failures[4].field == "groups[0].completions[4]" and result.rewards[4] == 0.0
    assert result.rewards[0] == result.rewards[3] and len(engine.read) == 3 == result.engine_reads


def test_on_a_gpu_the_reward_model_takes_its_share_of_the_judges_memory():
    judge, engines = split_memory({"gpu_memory_utilization": 0.8, "dtype": "float32", "max_model_len": 4096},
                                  GPU, {"--rm": 0.25}, judge=True)
    assert judge["gpu_memory_utilization"] == pytest.approx(0.6) and judge["max_model_len"] == 4096
    assert engines == {"--rm": {"gpu_memory_utilization": pytest.approx(0.2), "dtype": "float32"}}
    assert split_memory({}, GPU, {"--rm": 0.25}, judge=False)[1]["--rm"]["gpu_memory_utilization"] == 0.9


def test_two_engines_beside_the_judge_take_together_what_the_judge_alone_would():
    """A reward model and a process reward model: split once, never the judge's rest split again."""
    judge, engines = split_memory({}, GPU, {"--rm": 0.3, "--prm": 0.2}, judge=True)
    shares = [judge["gpu_memory_utilization"]] + [own["gpu_memory_utilization"] for own in engines.values()]
    assert shares == pytest.approx([0.45, 0.27, 0.18]) and sum(shares) == pytest.approx(0.9)
    _, alone = split_memory({}, GPU, {"--rm": 0.3, "--prm": 0.2}, judge=False)
    assert [own["gpu_memory_utilization"] for own in alone.values()] == pytest.approx([0.54, 0.36])
    with pytest.raises(ValueError, match=r"--rm 0.6 \+ --prm 0.5 = 1.1"):
        split_memory({}, GPU, {"--rm": 0.6, "--prm": 0.5}, judge=True)


def test_on_cpu_the_reward_model_gets_a_small_kv_cache_on_the_pooling_runner():
    judge, engines = split_memory({"enforce_eager": True}, CPU, {"--rm": 0.3}, judge=True)
    assert judge == {"enforce_eager": True}
    settings = classifier_defaults(engines["--rm"], CPU, lambda: DtypeChoice("float32", "test")).settings
    assert settings["kv_cache_memory_bytes"] == CLASSIFIER_CPU_KV_CACHE_BYTES and settings["runner"] == "pooling"
    assert settings["enforce_eager"] is True


def test_the_fit_maps_the_median_to_a_half_and_the_quartiles_to_a_quarter_and_three():
    raw = [float(x) for x in range(-3, 9)] + [1000.0]  # an outlier moves neither
    center, scale = fit(raw)
    q1, q3 = sorted(raw)[3], sorted(raw)[9]
    assert center == 3.0
    assert sigmoid((q1 - center) / scale) == pytest.approx(0.25)
    assert sigmoid((q3 - center) / scale) == pytest.approx(0.75)
    with pytest.raises(FitError):
        fit([1.0, 1.0, 1.0, 1.0, 2.0])
    assert math.isfinite(scale)


def test_a_chat_the_template_refuses_fails_its_item():
    class Refusing(FakeChat):
        def ids(self, chat):
            raise ChatRefused("the reward model's chat template refuses this chat: roles must alternate")

    rm, _ = scorer()
    rm.chat = Refusing()
    with pytest.raises(ItemFailure, match="roles must alternate") as failure:
        rm.request(JudgeInput("Q?", "a", chat=(("assistant", "hi"),)), "items[2]")
    assert (failure.value.code, failure.value.field) == ("INVALID_ARGUMENT", "items[2].chat")


def test_beside_the_judges_comparisons_a_members_reward_is_the_weighted_mean_over_both():
    from geval_server.groupwise.comparer import merge
    from geval_server.groupwise.results import GroupResult, RubricGroupResult
    from geval_server.groupwise.win_matrix import GroupOutcome

    def result(rewards, failures, reads):
        outcome = GroupOutcome(list(rewards), [], None, None, None, None)
        return GroupResult(list(rewards), list(failures), [RubricGroupResult("r", "h", outcome)],
                           engine_reads=reads, score_claims_removed=[0] * len(rewards))

    failed = ItemFailure("INVALID_ARGUMENT", "too long", "groups[0].completions[2]")
    judged, by_model = result([0.2, 0.8, 0.5], [None, None, None], 6), result([0.9, 0.1, 0.0], [None, None, failed], 2)
    (judged,) = merge([[judged], [by_model]], [[1.0], [3.0]])
    assert judged.rewards == pytest.approx([(0.2 + 3 * 0.9) / 4, (0.8 + 3 * 0.1) / 4, 0.0])
    assert judged.member_failures[2] is failed and judged.engine_reads == 8 and len(judged.per_rubric) == 2
