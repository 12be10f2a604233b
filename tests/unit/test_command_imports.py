"""`geval-reward` and the audit load none of the server's code: an install with only the
[audit] extra runs them (tests/engine/test_wheel_install.py runs one). Each check is a
fresh interpreter, so that nothing this test session imported counts."""

import json
import pathlib
import subprocess
import sys

import pytest

DATA = pathlib.Path(__file__).parents[1] / "data" / "audit_rows.jsonl"
SERVER_SIDE = ("geval_server", "vllm", "torch")


def _loaded_server_side(code: str) -> list[str]:
    """Runs `code` in a fresh interpreter; the server-side modules it left in sys.modules."""
    report = f"import json, sys; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {SERVER_SIDE})))"
    done = subprocess.run([sys.executable, "-c", f"{code}\n{report}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("module", ["geval_reward.cli", "geval_audit.cli", "geval_audit.runner", "geval_audit.redteam"])
def test_the_command_and_the_audit_import_no_server_code(module):
    assert _loaded_server_side(f"import {module}") == []


def test_an_audit_run_through_the_command_imports_no_server_code(tmp_path):
    """As far as an audit goes without a server: it reads the input and stops at a missing column."""
    argv = ["audit", str(DATA), "-o", str(tmp_path / "out"), "--target", "127.0.0.1:1", "--completion-column", "x"]
    run = f"""
from geval_reward.cli import main
try:
    main({argv!r})
except SystemExit as end:
    assert end.code == 2, end.code
"""
    assert _loaded_server_side(run) == []
