"""The built wheel, installed as a training machine installs it: into a fresh virtual
environment, without extras (the client: no torch, no vLLM), and with the [audit] extra
(`geval-reward audit` against a running server, none of the server's dependencies).

The wheel is built as `make dist` builds it. pip reaches the package index for the
dependencies; its cache (~/.cache/pip) makes reruns fast."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

REPO = pathlib.Path(__file__).parents[2]
DATA = REPO / "tests" / "data" / "audit_rows.jsonl"
PIP_CACHE = pathlib.Path.home() / ".cache" / "pip"
SOURCE_ROOTS = ("server", "client")

SCORE = """
import sys
from geval_client import RewardClient, make_item
with RewardClient(sys.argv[1]) as client:
    (result,) = client.score([make_item("Summarize: The council approved a new library on the old depot site.",
                                        "The council approved a library on the depot site.")])
print(result.reward)
"""

IMPORTABLE = """
import importlib, json, sys
found = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        continue
    found.append(name)
print(json.dumps(found))
"""


def _clean_env() -> dict[str, str]:
    """This environment without the settings that would reach back into the checkout
    or the test's own environment (PYTHONPATH, VIRTUAL_ENV) or turn pip's cache off."""
    drop = ("VIRTUAL_ENV", "PIP_NO_CACHE_DIR")
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k not in drop}


def _run(*command, cwd: pathlib.Path, timeout_s: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=_clean_env(), capture_output=True, text=True,
                          timeout=timeout_s)
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    """Built once per session with `make dist`'s command (the sdist, then the wheel from it)."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (built,) = out.glob("*.whl")
    return built


def _venv(path: pathlib.Path, requirement: str) -> pathlib.Path:
    """A fresh virtual environment (no system site packages) with `requirement` installed; its bin/."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, env=_clean_env())
    # --no-compile: the environment is thrown away, and byte-compiling the audit's dependencies
    # (scipy, pandas, pyarrow, matplotlib) took half of pip's CPU time (58 s of 2 cores against 30 s).
    _run(path / "bin" / "python", "-m", "pip", "install", "--no-compile", "--cache-dir", PIP_CACHE, requirement,
         cwd=path)
    return path / "bin"


def _importable(bin_dir: pathlib.Path, *modules: str) -> list[str]:
    return json.loads(_run(bin_dir / "python", "-c", IMPORTABLE, *modules, cwd=bin_dir.parent).stdout)


def test_the_wheel_holds_every_file_of_the_four_packages_and_the_command(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {
        path.relative_to(REPO / root).as_posix()
        for root in SOURCE_ROOTS for path in (REPO / root).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and not path.parts[-2].endswith(".egg-info")
    }
    assert {"geval_reward/cli.py", "geval_client/pb/reward_pb2.pyi", "geval_audit/data/injections.jsonl",
            "geval_server/presets/summeval-coherence.toml"} <= sources
    assert sorted(sources - names) == []
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "geval-reward = geval_reward.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_wheel_without_extras_scores_through_the_server_with_no_torch_or_vllm(wheel, server_address, tmp_path):
    bin_dir = _venv(tmp_path / "venv", str(wheel))
    script = tmp_path / "score.py"
    script.write_text(SCORE, encoding="utf-8")
    reward = float(_run(bin_dir / "python", script, server_address, cwd=tmp_path).stdout)
    assert 0.0 <= reward <= 1.0
    assert _importable(bin_dir, "geval_client", "torch", "vllm") == ["geval_client"]
    # `serve` there names the extra the server needs instead of a traceback.
    serve = subprocess.run([bin_dir / "geval-reward", "serve"], cwd=tmp_path, env=_clean_env(),
                           capture_output=True, text=True, timeout=120)
    assert serve.returncode == 1 and "[gpu] extra" in serve.stderr, serve.stderr


def test_the_wheel_with_the_audit_extra_runs_an_audit_without_the_servers_dependencies(
    wheel, server_address, tmp_path
):
    bin_dir = _venv(tmp_path / "venv", f"{wheel}[audit]")
    output = tmp_path / "audit"
    done = _run(
        bin_dir / "geval-reward", "audit", DATA, "--output", output, "--target", server_address, "--limit", "2",
        "--reference-column", "reference", "--rubric", "summeval-coherence", "--no-semscore",
        "--bootstrap-resamples", "200", cwd=tmp_path,
    )
    assert "audit: 2 rows scored now; 2 rows in the checks, 0 left out" in done.stdout
    assert "## Self-preference against human references" in (output / "report.md").read_text(encoding="utf-8")
    assert _importable(bin_dir, "geval_audit", "scipy", "vllm", "torch", "prometheus_client") == [
        "geval_audit", "scipy"
    ]
