"""The `[gpu]` extra installs with the lowest and the newest vLLM it accepts: pip resolves the
project's dependencies beside each in a fresh environment (a dry run: nothing is installed), so
the range never names a release that cannot be installed beside the server's own stack."""

from __future__ import annotations

import pytest

from tests.vllm_versions import releases


def resolved(version: str) -> dict[str, str]:
    try:
        return releases.resolve_gpu_install(version)
    except releases.Unreachable as error:
        pytest.skip(f"PyPI could not be asked: {error}")


def test_the_gpu_extra_installs_with_the_lowest_vllm_it_accepts():
    assert resolved(releases.lowest_accepted())["vllm"] == releases.lowest_accepted()


def test_the_gpu_extra_installs_with_the_newest_vllm_it_accepts():
    try:
        newest = releases.accepted(releases.released())[0]
    except releases.Unreachable as error:
        pytest.skip(f"PyPI's vLLM releases could not be listed: {error}")
    assert resolved(newest)["vllm"] == newest
