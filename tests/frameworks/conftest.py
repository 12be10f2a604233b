"""tests/frameworks: the adapters driven through the trainers' own code, installed for the
suite. Each framework version is installed once, `pip install --no-deps --target`, under
~/.cache/geval-frameworks/<name>-<version> (GEVAL_FRAMEWORKS_CACHE to move it), and run in a
subprocess that puts it first on sys.path: only the modules a test names are imported from
it, the rest of the framework's heavy stack (deepspeed, vLLM) never is. torch and
transformers come from the test environment (CPU). A version PyPI cannot be reached for is
skipped, naming why; any other install failure fails the test."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from tests.package_index import NETWORK_FAILURES

REPO = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path(os.environ.get("GEVAL_FRAMEWORKS_CACHE", pathlib.Path.home() / ".cache" / "geval-frameworks"))


def pytest_collection_modifyitems(items):
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.frameworks)


def installed(name: str, version: str) -> pathlib.Path:
    """The folder holding `name==version` (no dependencies), installed on first use."""
    target = CACHE / f"{name}-{version}"
    done = target / ".installed"
    if done.exists():
        return target
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
               "--disable-pip-version-check", "--target", str(target), f"{name}=={version}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        output = result.stdout + result.stderr
        if any(failure in output for failure in NETWORK_FAILURES):
            pytest.skip(f"{name}=={version} could not be installed from the package index: {output.strip()[-300:]}")
        raise RuntimeError(f"pip install {name}=={version} failed:\n{output}")
    done.touch()
    return target


def run_with(paths: list[pathlib.Path], script: str, timeout: float = 120, env: dict | None = None) -> str:
    """Runs `script` in a fresh interpreter with `paths` first on sys.path, then the repo's client
    and server; returns its stdout; fails with its output when it exits non-zero."""
    pythonpath = os.pathsep.join([*map(str, paths), str(REPO / "client"), str(REPO / "server"), str(REPO)])
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {}), "PYTHONPATH": pythonpath}, cwd=REPO,
    )
    if result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")
    return result.stdout
