"""Every import path and command the docs give users works as they give it: each module with the
names they use, every `geval_client.*` name and client file path in README.md, docs/,
training_examples/ and deploy/, the veRL and OpenRLHF files loaded by path as those frameworks
load them, and `python -m geval_client.openrlhf_bridge`."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.engine.readme_snippets import snippet

ROOT = pathlib.Path(__file__).parents[2]
CLIENT = ROOT / "client" / "geval_client"
# Paths kept where the docs name them, whose code lives in trainers/ or fleet/: the names each re-exports.
ENTRY_POINTS = {
    "geval_client.trl": ("AsyncGEvalReward", "AsyncGroupwiseReward", "GEvalReward", "GroupwiseReward"),
    "geval_client.verl": ("compute_score", "compute_score_async", "compute_score_batch",
                          "compute_score_batch_groupwise", "compute_score_prime", "compute_score_rate_limited",
                          "StepRewardManager"),
    "geval_client.openrlhf": ("make_reward_func", "reward_func"),
    "geval_client.openrlhf_bridge": ("main",),
    "geval_client.trainer_text": ("completion_text", "judge_prompt", "message_text"),
    "geval_client.ray_replicas": ("RayReplicas",),
}
DOCUMENTED = {
    **ENTRY_POINTS,
    "geval_client.defaults": ("DEFAULT_PORT", "DEFAULT_TARGET", "DEFAULT_TIMEOUT_S"),
    "geval_client.errors": ("ItemNotScored", "RewardServerError"),
}
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "training_examples").glob("*.py")),
        *sorted(path for path in (ROOT / "deploy").rglob("*") if path.is_file())]
# docs/trainers/verl.md, before 0.7
VERL_GROUPWISE_FILE = "from geval_client.verl import compute_score_batch_groupwise\n"


def _resolve(dotted: str):
    """The module or attribute a dotted name stands for: its longest importable prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            found = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:
                raise
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(dotted)


@pytest.mark.parametrize("module", sorted(DOCUMENTED))
def test_each_documented_module_holds_its_names(module):
    imported = importlib.import_module(module)
    assert [name for name in DOCUMENTED[module] if not hasattr(imported, name)] == []


def test_the_package_holds_everything_it_exports():
    import geval_client

    assert [name for name in geval_client.__all__ if not hasattr(geval_client, name)] == []


@pytest.mark.parametrize("module", sorted(ENTRY_POINTS))
def test_each_entry_point_only_reexports_from_where_its_docstring_says(module):
    """Only a docstring, absolute imports from the code's home (so a framework can load the file by
    its path), __all__ and a __main__ guard; the docstring names it the documented entry point and
    names the home's file."""
    path = CLIENT / f"{module.split('.')[-1]}.py"
    tree = ast.parse(path.read_text())
    docstring = ast.get_docstring(tree)
    homes = {node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module != "__future__"}
    assert len(homes) == 1, homes
    [home] = homes
    assert "documented" in docstring.splitlines()[0], docstring
    assert home.removeprefix("geval_client.").replace(".", "/") + ".py" in docstring.splitlines()[0], (home, docstring)
    for node in tree.body[1:]:
        assert (isinstance(node, ast.ImportFrom) and node.level == 0
                or isinstance(node, ast.Import) and [alias.name for alias in node.names] == ["sys"]
                or isinstance(node, ast.Assign) and [target.id for target in node.targets] == ["__all__"]
                or isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"), ast.unparse(node)
    assert sorted(importlib.import_module(module).__all__) == sorted(ENTRY_POINTS[module])


def test_every_client_name_and_file_the_docs_give_is_there():
    dotted, files, missing = set(), set(), []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        dotted |= set(re.findall(r"\bgeval_client(?:\.\w+)+", text))
        files |= set(re.findall(r"\bgeval_client/[\w/.]*\w", text))
        for module, names in re.findall(r"^\s*from (geval_client[\w.]*) import ([\w, ]+)", text, re.M):
            dotted |= {f"{module}.{name.strip()}" for name in names.split(",") if name.strip()}
    for name in sorted(dotted):
        try:
            _resolve(name)
        except (ImportError, AttributeError) as error:
            missing.append(f"{name}: {error}")
    missing += [path for path in sorted(files) if not (CLIENT.parent / path).exists()]
    assert dotted and not missing, missing


def _load_by_path(path: pathlib.Path, name: str):
    """As OpenRLHF loads a --reward.remote_url FILE.py (openrlhf/utils/agent.py, remote_rm_utils.py)
    and veRL 0.7-0.9 a custom_reward_function.path file (verl/utils/import_utils.py, load_module):
    a spec from the file's path under a name of theirs, kept out of sys.modules."""
    spec = importlib.util.spec_from_file_location(name, str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verl_name(path: pathlib.Path) -> str:
    return f"custom_module_{hash(os.path.abspath(path))}"


def test_openrlhf_loads_the_readmes_file_and_the_entry_point_by_path(tmp_path):
    written = tmp_path / "openrlhf_reward.py"
    written.write_text(snippet("python", "geval_client.openrlhf"))
    assert callable(_load_by_path(written, "reward_func").reward_func)
    by_path = _load_by_path(CLIENT / "openrlhf.py", "reward_func")
    assert callable(by_path.reward_func) and callable(by_path.make_reward_func)


def test_verl_loads_the_documented_file_and_the_entry_point_by_path(tmp_path):
    written = tmp_path / "geval_reward.py"
    written.write_text(VERL_GROUPWISE_FILE)
    assert callable(_load_by_path(written, _verl_name(written)).compute_score_batch_groupwise)
    by_path = _load_by_path(CLIENT / "verl.py", _verl_name(CLIENT / "verl.py"))
    assert all(callable(getattr(by_path, name)) for name in ENTRY_POINTS["geval_client.verl"])


def test_the_bridge_command_runs_as_documented():
    done = subprocess.run([sys.executable, "-m", "geval_client.openrlhf_bridge", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m geval_client.openrlhf_bridge"), done.stdout
