"""Every vLLM name the server uses (uses.py, read from server/) exists with the signature used in
the code of each vLLM release the `[gpu]` extra accepts: its lowest (0.26.0, the newest on torch
2.11, which CUDA images carry), its newest on PyPI now, and the vLLM installed here.
GEVAL_VLLM_VERSIONS=all checks every accepted release, or a comma-separated list those. A release
that lacks one fails, naming each missing name."""

from __future__ import annotations

import os

import pytest

from tests.vllm_versions import releases
from tests.vllm_versions.source import VllmSource
from tests.vllm_versions.uses import server_uses

ASKED = os.environ.get("GEVAL_VLLM_VERSIONS", "")


@pytest.fixture(scope="module")
def uses():
    return server_uses()


def check(version: str, uses) -> None:
    try:
        root = releases.sources(version)
    except releases.Unreachable as error:
        pytest.skip(f"vLLM {version} could not be fetched: {error}")
    problems = VllmSource(root, version).problems(uses)
    print(f"vLLM {version} ({releases.torch_pin(root)}): {len(uses)} uses, {len(problems)} missing")
    assert not problems, "\n".join(problems)


def newest_accepted() -> str:
    try:
        return releases.accepted(releases.released())[0]
    except releases.Unreachable as error:
        pytest.skip(f"PyPI's vLLM releases could not be listed: {error}")


def test_the_lowest_accepted_release_has_every_name_the_server_uses(uses):
    check(releases.lowest_accepted(), uses)


def test_the_newest_accepted_release_has_every_name_the_server_uses(uses):
    check(newest_accepted(), uses)


def test_the_installed_vllm_has_every_name_the_server_uses(uses):
    found = releases.installed()
    if found is None:
        pytest.skip("no vLLM installed here")
    version, root = found
    problems = VllmSource(root, version).problems(uses)
    assert not problems, "\n".join(problems)


@pytest.mark.skipif(not ASKED, reason="GEVAL_VLLM_VERSIONS not set: the range's ends only")
def test_the_releases_asked_for_have_every_name_the_server_uses(uses):
    versions = releases.accepted(releases.released()) if ASKED == "all" else ASKED.split(",")
    failures = []
    for version in versions:
        try:
            check(version, uses)
        except AssertionError as error:
            failures.append(str(error))
    assert not failures, "\n".join(failures)
