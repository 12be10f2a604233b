"""`--help` prints its usage and nothing else, for `geval-reward` and each command run
without a server (`serve --help` imports vLLM: tests/engine/test_serve_flags.py)."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("command", [[], ["audit"], ["redteam"], ["fit-reward-model"]])
def test_help_opens_with_its_usage(command):
    shown = subprocess.run([sys.executable, "-m", "geval_reward.cli", *command, "--help"],
                           capture_output=True, text=True, check=True)
    assert shown.stdout.startswith(f"usage: {' '.join(['geval-reward', *command])} [-h]") and shown.stderr == ""
