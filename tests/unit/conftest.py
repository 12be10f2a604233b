"""tests/unit is pure logic: no vLLM, no model weights, no shared data sets. When only these
tests run, the session fails if any of them imported vLLM or torch."""

import pathlib
import sys

import pytest
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.geval.slot import LabelVocabulary

from tests.unit.fakes import SpaceDigitTokenizer

UNIT_TESTS = pathlib.Path(__file__).parent
HEAVY = ("vllm", "torch")


@pytest.fixture(scope="session", autouse=True)
def no_engine_imports(request):
    yield
    if all(UNIT_TESTS in item.path.parents for item in request.session.items):
        imported = [name for name in HEAVY if name in sys.modules]
        assert not imported, f"tests/unit imported {imported}: move the test that needs them to tests/engine"


@pytest.fixture(scope="module")
def tokenization():
    """The fake tokenizer's Tokenization (digits and spaces as tokens of their own)."""
    return Tokenization(SpaceDigitTokenizer())


@pytest.fixture(scope="module")
def vocabulary(tokenization):
    return LabelVocabulary(tokenization)
