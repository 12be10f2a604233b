"""The likelihood scorer through the real server and engine: what it reads, how the
prefix cache is used, the reference directions, and combination with G-Eval by weight.
Assertions are about mechanism and contract, never the tiny judge's taste."""

import math

import pytest
from geval_client import GEvalScore, LikelihoodScore, make_item
from geval_client.pb import reward_pb2
from geval_server.scorers.likelihood.guards import copy_rate, guard_factor, repetition_rate

ARTICLE = (
    "The city council voted on Tuesday to build a new public library on the site of the old bus "
    "depot. Construction starts in March and takes two years, and the library will hold a "
    "children's wing, a reading garden and rooms the public can book for free."
)
SUMMARIES = [
    "The council approved a new library on the old depot site.",
    "A library with a children's wing replaces the old bus depot from March.",
    "Building starts in March; the library takes two years.",
]


@pytest.fixture(scope="module")
def tokenizer(server_address, client):
    from geval_server.engine.embedded_model import EMBEDDED_MODEL, resolve_model
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model(EMBEDDED_MODEL))


def test_the_presets_are_served_as_likelihood_scorers(client):
    info = {r.name: r for r in client.info().rubrics}
    for name in ("likelihood-summeval-coherence", "likelihood-topical-chat-naturalness",
                 "likelihood-qags-consistency", "likelihood-reference-match"):
        assert info[name].kind == reward_pb2.SCORER_KIND_LIKELIHOOD
        assert "geometric-mean token probability" in info[name].likelihood.description
    assert info["likelihood-reference-match"].uses_reference
    assert "PMI" in info["test-likelihood-pmi-guarded"].likelihood.description
    assert info["test-likelihood-pmi-guarded"].likelihood.baseline == "unconditional"


def test_a_completion_is_read_token_by_token(client, tokenizer):
    [result] = client.score([make_item(ARTICLE, SUMMARIES[0])], rubrics=["likelihood-summeval-coherence"])
    [score] = result.scores
    assert isinstance(score, LikelihoodScore)
    assert score.tokens_read == len(tokenizer.encode(SUMMARIES[0]))
    assert score.mean_logprob < 0
    assert score.score == pytest.approx(score.mean_logprob) and score.guard == 1.0
    assert score.reward == pytest.approx(math.exp(score.mean_logprob))  # geometric-mean token probability
    assert result.reward == pytest.approx(score.reward)


def test_cache_hits_do_not_change_what_is_read(client):
    """Alone (cold), in a group sharing the article (its prefix cached), and the same item
    again (cached past the completion's start: read again without the cache): one value."""
    rubric = ["likelihood-summeval-fluency"]
    alone = client.score([make_item(ARTICLE, SUMMARIES[1])], rubrics=rubric)[0].scores[0].mean_logprob
    group = client.score([make_item(ARTICLE, s) for s in SUMMARIES], rubrics=rubric)
    again = client.score([make_item(ARTICLE, SUMMARIES[1])], rubrics=rubric)[0].scores[0].mean_logprob
    assert group[1].scores[0].mean_logprob == pytest.approx(alone, abs=1e-4)
    assert again == pytest.approx(alone, abs=1e-4)
    assert len({round(r.scores[0].mean_logprob, 4) for r in group}) == len(SUMMARIES)


def test_texts_sharing_an_opening_read_as_each_alone(client):
    """Summaries that open alike past a KV block (32 tokens on CPU) find cached blocks past
    their start: read in one call, those positions come from the read of the batch that
    computed them; read alone afterwards (every block cached), from one-token reads."""
    article = ("The regional rail operator will run trains between the two northern cities every fifteen "
               "minutes from the spring timetable, after a year in which one train in five was late.")
    opening = ("The regional rail operator said on Monday that weekday trains between the two northern "
               "cities will run every fifteen minutes from the spring timetable onwards, after a year of")
    items = [make_item(article, opening + ending) for ending in (" delays.", " cancellations and complaints.",
                                                                 " late trains, the operator said.")]
    rubric = ["likelihood-summeval-relevance"]
    together = client.score(items, rubrics=rubric)
    alone = [client.score([item], rubrics=rubric)[0] for item in reversed(items)][::-1]
    for batched, single in zip(together, alone):
        assert batched.scores[0].tokens_read == single.scores[0].tokens_read
        assert batched.scores[0].mean_logprob == pytest.approx(single.scores[0].mean_logprob, abs=1e-4)
    assert len({round(r.scores[0].mean_logprob, 4) for r in together}) == len(items)


def test_combined_with_geval_by_weight_in_one_call(client):
    rubrics = {"summeval-coherence": 1.0, "likelihood-summeval-coherence": 3.0}
    [result] = client.score([make_item(ARTICLE, SUMMARIES[0])], rubrics=rubrics)
    geval, likelihood = result.scores
    assert isinstance(geval, GEvalScore) and isinstance(likelihood, LikelihoodScore)  # each its own measurements
    assert result.reward == pytest.approx((geval.reward + 3 * likelihood.reward) / 4)


def test_reference_directions_read_both_texts_and_need_the_reference(client, tokenizer):
    reference = "The council will turn the old bus depot into a public library."
    results = client.score(
        [make_item(ARTICLE, SUMMARIES[0], reference=reference), make_item(ARTICLE, SUMMARIES[0])],
        rubrics=["likelihood-reference-match"],
    )
    [score] = results[0].scores
    assert score.tokens_read == len(tokenizer.encode(SUMMARIES[0])) + len(tokenizer.encode(reference))
    assert 0.0 < score.reward < 1.0
    assert score.score == pytest.approx(math.log(score.reward))
    assert results[1].error.field == "items[1].reference"


def test_pmi_and_guards(client):
    copied = ARTICLE.split(". ")[0] + "."
    repeated = " ".join([SUMMARIES[0]] * 4)
    results = client.score([make_item(ARTICLE, s) for s in (SUMMARIES[0], copied, repeated)],
                           rubrics=["test-likelihood-pmi-guarded"])
    clean, copy, repeat = (r.scores[0] for r in results)

    def pmi_reward(score):
        return 1 / (1 + math.exp(-score.score))

    # PMI: the conditional read minus the instruction-alone read, per token; logistic reward.
    assert clean.reward == pytest.approx(pmi_reward(clean))
    assert clean.score != pytest.approx(clean.mean_logprob)
    assert copy_rate(copied, ARTICLE) == 1.0 and copy.reward == 0.0  # all copied: past the 0.5 limit
    factor = guard_factor(repetition_rate(repeated), 0.1)
    assert 0.0 < factor < 1.0
    assert repeat.reward == pytest.approx(pmi_reward(repeat) * factor) and repeat.guard == pytest.approx(factor)
    assert copy.mean_logprob < 0 and repeat.mean_logprob < 0  # read all the same


def test_an_item_over_the_context_fails_alone(client):
    results = client.score([make_item("word " * 9000, SUMMARIES[0]), make_item(ARTICLE, SUMMARIES[0])],
                           rubrics=["likelihood-summeval-relevance"])
    assert results[0].error.code == "INVALID_ARGUMENT"
    assert "max_model_len" in results[0].error.message
    assert results[0].error.field == "items[0].prompt"
    assert results[1].ok
