"""Auto chain-of-thought: steps generated once from the criteria, cached, frozen.
A fake engine counts generation calls (pure logic); the real judge's steps are
checked through the server in test_server.py."""

import asyncio

import pytest
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.geval import autocot
from geval_server.scorers.geval.rubrics import load_rubrics

from tests.unit.fakes import SpaceDigitTokenizer


class CountingEngine:
    def __init__(self):
        self.calls = 0

    async def generate_greedy(self, prompt_ids, max_tokens):
        self.calls += 1
        return " Read the answer.\n2. Judge how clear it is.\n3. Assign a score from 1 to"


@pytest.fixture
def custom_rubric():
    import pathlib

    return load_rubrics([pathlib.Path(__file__).parents[1] / "rubrics"])["test-clarity-autocot"]


def test_steps_are_generated_once_and_cached(tmp_path, monkeypatch, custom_rubric):
    monkeypatch.setenv("GEVAL_REWARD_CACHE", str(tmp_path))
    engine, tokenization = CountingEngine(), Tokenization(SpaceDigitTokenizer())
    first = asyncio.run(autocot.ensure_steps(engine, tokenization, "judge-a", custom_rubric))
    again = asyncio.run(autocot.ensure_steps(engine, tokenization, "judge-a", custom_rubric))
    assert engine.calls == 1
    assert first == again and first.steps_generated
    # the unfinished last line is dropped
    assert first.evaluation_steps == "1. Read the answer.\n2. Judge how clear it is."
    assert len(list((tmp_path / "steps").glob("*.txt"))) == 1
    asyncio.run(autocot.ensure_steps(engine, tokenization, "judge-b", custom_rubric))
    assert engine.calls == 2  # another judge writes its own steps


def test_rubrics_with_steps_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("GEVAL_REWARD_CACHE", str(tmp_path))
    engine = CountingEngine()
    rubric = load_rubrics()["summeval-coherence"]
    assert asyncio.run(autocot.ensure_steps(engine, Tokenization(SpaceDigitTokenizer()), "j", rubric)) is rubric
    assert engine.calls == 0


def test_steps_prompt_ends_with_the_steps_header():
    tokenization = Tokenization(SpaceDigitTokenizer())
    rubric = load_rubrics()["summeval-coherence"]
    text = tokenization.decode(autocot.steps_prompt(tokenization, rubric))
    assert rubric.evaluation_criteria in text and text.endswith("Evaluation Steps:\n\n1.")
