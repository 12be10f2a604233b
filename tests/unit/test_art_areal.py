"""What the ART and AReaL adapters give the judge, without a server or the frameworks:
a trajectory's prompt and completion, an AReaL row's fields, and the reward object that
AReaL's process pool pickles. tests/frameworks/test_art.py and test_areal.py drive them
through the frameworks' own code against a server."""

from __future__ import annotations

import asyncio
import pickle
from types import SimpleNamespace

import pytest
from geval_client.trainers.areal import AREAL_TIMEOUT_S, make_reward_fn
from geval_client.trainers.art import score_group, trajectory_sample


def _trajectory(messages, metadata=None, additional_histories=()):
    """What trajectory_sample reads of an art.Trajectory."""
    return SimpleNamespace(messages=lambda: messages, metadata=metadata or {},
                           additional_histories=list(additional_histories))


def test_a_trajectory_is_its_task_then_its_assistant_text():
    sample = trajectory_sample(_trajectory([
        {"role": "system", "content": "You summarize."},
        {"role": "user", "content": [{"type": "text", "text": "Summarize."}]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]},
        {"role": "tool", "content": "the article"},
        {"role": "assistant", "content": "A summary."},
    ], {"reference": "R"}))
    assert sample.prompt == [{"role": "system", "content": "You summarize."}, {"role": "user", "content": "Summarize."}]
    assert sample.completion == "A summary."  # tool calls and results are not the judge's to read
    assert sample.reference == "R"


def test_a_trajectory_without_a_reply_is_an_empty_completion_and_a_reference_must_be_text():
    sample = trajectory_sample(_trajectory([{"role": "user", "content": "Summarize."}], {"reference": 3}))
    assert (sample.completion, sample.reference) == ("", None)


def test_additional_histories_are_refused_as_ruler_refuses_them():
    with pytest.raises(ValueError, match="additional_histories"):
        trajectory_sample(_trajectory([], additional_histories=[object()]))


def test_group_options_need_groupwise_and_raise_even_when_swallowing():
    group = SimpleNamespace(trajectories=[])
    with pytest.raises(ValueError, match="need groupwise=True"):
        asyncio.run(score_group(group, "localhost:1", schedule="anchor", swallow_exceptions=True))


def test_an_areal_row_gives_the_judge_its_messages_answer_and_rubric():
    reward = make_reward_fn("localhost:1", "a")
    sample = reward.sample("<|im_start|>user\nSummarize.<|im_end|>", "A summary.<|im_end|>\n",
                           {"messages": [{"role": "user", "content": "Summarize."}], "answer": "R",
                            "rubrics": "b"})
    assert sample.prompt == [{"role": "user", "content": "Summarize."}]
    assert (sample.completion, sample.reference) == ("A summary.", "R")
    assert [r.name for r in sample.rubrics] == ["b"]
    # Without the messages field, the prompt as the workflow passes it.
    assert reward.sample("Summarize.", "Fine.", {}).prompt == "Summarize."


def test_the_areal_reward_pickles_and_answers_inside_the_wrappers_timeout():
    reward = make_reward_fn("localhost:1", {"a": 1, "b": 2}, prompt_key="question")
    assert pickle.loads(pickle.dumps(reward)) == reward
    assert reward.scorer.timeout == AREAL_TIMEOUT_S < 15  # AsyncRewardWrapper's timeout_seconds
    assert reward.scorer.retry.wait_for_server_s == 0
