"""tests/unit: pure logic, fast (fakes allowed). tests/engine: the real vLLM engine and
judge behind a real server (tests/engine/conftest.py), marked `engine`, so
`pytest -m "not engine"` runs the unit tests alone."""

import pathlib

import pytest

ENGINE_TESTS = pathlib.Path(__file__).parent / "engine"


def pytest_collection_modifyitems(items):
    for item in items:
        if ENGINE_TESTS in item.path.parents:
            item.add_marker(pytest.mark.engine)
