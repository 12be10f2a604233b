"""tests/vllm_versions: the server's uses of vLLM checked against each accepted release's own code,
marked `vllm_versions`; the releases' .py files are fetched once from PyPI and cached (releases.py)."""

from __future__ import annotations

import pathlib

import pytest


def pytest_collection_modifyitems(items):
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.vllm_versions)
