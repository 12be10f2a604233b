"""geval_client.trainers.skyrl without skyrl-gym: the options and rows it refuses, and that the
module imports without it (GEvalEnv itself runs through skyrl-gym in tests/frameworks/test_skyrl.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from geval_client.trainers.skyrl import JudgedConversation, Settings


def test_unknown_options_are_refused_naming_the_known_ones():
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['turns'\]; options are server, rubrics"):
        Settings.of({"server": "judge:50051", "turns": 2})


def test_exclude_is_refused_where_every_step_needs_a_number():
    with pytest.raises(ValueError, match="needs a number for every sample"):
        Settings.of({"server": "judge:50051", "on_error": "exclude"})


def test_a_row_with_too_few_follow_ups_is_refused():
    with pytest.raises(ValueError, match="follow_ups: 2 user messages are needed for max_turns=3"):
        JudgedConversation(None, {"max_turns": 3, "follow_ups": ["More?"]}, server="judge:50051")


def test_env_config_sets_options_over_the_registered_ones():
    env = JudgedConversation({"follow_up": "Again."}, {"max_turns": 2}, server="judge:50051", follow_up="More?")
    assert env.follow_ups == ["Again."]


def test_the_module_imports_without_skyrl_gym():
    code = ("import sys; sys.modules['skyrl_gym'] = None\n"
            "import geval_client.trainers.skyrl as skyrl\n"
            "try:\n    skyrl.GEvalEnv\nexcept ImportError:\n    print('made on first use')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "made on first use", done.stderr
