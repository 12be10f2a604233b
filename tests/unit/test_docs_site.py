"""The documentation site (mkdocs.yml) builds strictly, offline: every link and anchor resolves and
every page is in the navigation; a broken link, anchor or page fails the build; and the hooks
that serve the README and benchmarks/RESULTS.md as pages point links written for GitHub at the
site (scripts/docs_site.py)."""

from __future__ import annotations

import importlib.util
import logging
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

for tool in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
    pytest.importorskip(tool, reason=f"{tool} is not installed: the site's tools come with the dev extra")

ROOT = pathlib.Path(__file__).resolve().parents[2]
# load_config takes docs_dir and site_dir over mkdocs.yml's; relative paths in it (the hooks,
# mkdocstrings' client/) still resolve from the repository.
BUILD = """
import logging, sys
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort
logging.basicConfig(format="%(levelname)s %(message)s")
try:
    build(load_config(sys.argv[1], docs_dir=sys.argv[2], site_dir=sys.argv[3], strict=True))
except Abort as error:
    sys.exit(str(error))
"""


def _build(tmp_path: pathlib.Path, docs: pathlib.Path = ROOT / "docs") -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-c", BUILD, str(ROOT / "mkdocs.yml"), str(docs), str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_site", ROOT / "scripts" / "docs_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_strictly(tmp_path):
    done = _build(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    site = tmp_path / "site"
    assert (site / "index.html").exists() and (site / "results" / "index.html").exists()
    assert "geval_client.trl.AsyncGEvalReward" in (site / "reference" / "trainers" / "index.html").read_text()


# Each breaks the build alone: strict mode fails on any warning, and the build logs every one.
BROKEN = {
    "a page": ("[a page](no-such-page.md)", "no-such-page.md"),
    "an anchor": ("[an anchor](openrlhf.md#no-such-heading)", "no-such-heading"),
    "a file outside docs": ("[a file](../../training_examples/no_such_example.py)", "no_such_example.py"),
    "the README's anchor": ("[the README](../../README.md#no-such-section)", "no-such-section"),
}


def test_a_broken_link_anchor_or_page_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    page = docs / "trainers" / "verl.md"
    page.write_text(page.read_text() + "".join(f"\nSee {link}.\n" for link, _ in BROKEN.values()))
    (docs / "trainers" / "orphan.md").write_text("# A page left out of the navigation\n")
    done = _build(tmp_path, docs)
    assert done.returncode != 0
    warnings = done.stderr.split("WARNING ")[1:]  # a warning may run over several lines
    for what, (_, named) in {**BROKEN, "a page not in the nav": ("", "orphan.md")}.items():
        assert any(named in warning for warning in warnings), f"{what}: no warning names {named!r}:\n{done.stderr}"
    assert f"Aborted with {len(BROKEN) + 1} warnings in strict mode!" in done.stderr, done.stderr


def test_links_written_for_github_point_at_the_site():
    hooks = _hooks()
    readme = hooks.rewrite_links(
        "[install](docs/install.md#a-training-machine) [results](benchmarks/RESULTS.md#performance)\n"
        "[the module map, and where new work\ngoes](docs/development.md) [manifests](deploy/kubernetes/)\n"
        "`[in code](docs/install.md)`\n```\n[in a block](docs/install.md)\n```\n[web](https://example.org/x.md)\n",
        "index.md")
    assert readme == (
        "[install](install.md#a-training-machine) [results](results.md#performance)\n"
        "[the module map, and where new work\ngoes](development.md) manifests (`deploy/kubernetes`)\n"
        "`[in code](docs/install.md)`\n```\n[in a block](docs/install.md)\n```\n[web](https://example.org/x.md)\n")
    page = hooks.rewrite_links("[RESULTS](../../benchmarks/RESULTS.md#x) [README](../../README.md#rubrics) "
                               "[verl](verl.md) [training_examples/skyrl_env.py](../../training_examples/skyrl_env.py)",
                               "trainers/skyrl.md")
    assert page == ("[RESULTS](../results.md#x) [README](../index.md#rubrics) [verl](verl.md) "
                    "training_examples/skyrl_env.py")


def test_a_link_to_a_missing_repository_file_is_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.docs_site"):
        _hooks().rewrite_links("[gone](../../training_examples/gone.py)", "trainers/trl.md")
    assert "training_examples/gone.py" in caplog.text
