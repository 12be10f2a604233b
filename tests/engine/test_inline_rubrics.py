"""Rubrics sent with requests, through the real server and judge: per-item rubrics
score exactly as the same rubrics served from files, generated steps can be
reviewed before scoring, and a bad rubric names its field."""

import grpc
import pytest
from geval_client import RewardServerError, Sampling, make_item
from geval_server.scorers.geval.rubrics import PRESET_DIR, read_toml

ARTICLE = (
    "The city council voted on Tuesday to build a new public library on the site of the old bus "
    "depot. Construction starts in March and takes two years."
)
SUMMARIES = [
    "The council approved a new library on the old depot site.",
    "A library will be built. It takes two years.",
    "Bus depot library council Tuesday March.",
]
PRESETS = ["summeval-coherence", "summeval-fluency", "summeval-relevance"]


def _preset(name: str) -> dict:
    return read_toml(PRESET_DIR / f"{name}.toml")


def test_every_item_with_its_own_rubric_scores_as_that_rubric_served_from_a_file(client):
    items = [make_item(ARTICLE, summary, rubrics=[_preset(name)]) for summary, name in zip(SUMMARIES, PRESETS)]
    batched = client.score(items)
    alone = [client.score([make_item(ARTICLE, s)], rubrics=name)[0] for s, name in zip(SUMMARIES, PRESETS)]
    for name, inline, served in zip(PRESETS, batched, alone):
        assert inline.ok, inline.error.message
        assert inline.scores[0].rubric == name
        assert inline.scores[0].content_hash == served.scores[0].content_hash  # the very same prompt
        assert inline.reward == pytest.approx(served.reward, abs=1e-5)
        assert list(inline.scores[0].distribution.values()) == pytest.approx(
            list(served.scores[0].distribution.values()), abs=1e-5
        )


def test_a_rubric_without_steps_is_prepared_once_and_can_be_reviewed_before_scoring(client):
    rubric = {
        "name": "engine-test-conciseness", "criterion": "Conciseness",
        "task_introduction": "You will be given a news article and a summary of it. Rate the summary on one metric.",
        "evaluation_criteria": "Conciseness (1-5) - the summary says what matters in few words.",
        "scale": {"min": 1, "max": 5},
    }
    info = client.prepare_rubrics([rubric])[0]
    assert info.geval.steps_generated and info.geval.evaluation_steps.startswith("1.")
    assert list(info.geval.labels) == ["1", "2", "3", "4", "5"] and info.content_hash
    results = client.score([make_item(ARTICLE, SUMMARIES[0], rubrics=[rubric]),
                            make_item(ARTICLE, SUMMARIES[1])], rubrics=[("summeval-coherence", 1.0)])
    assert results[0].scores[0].content_hash == info.content_hash  # the steps the caller reviewed
    assert results[1].scores[0].rubric == "summeval-coherence"
    assert client.prepare_rubrics([rubric])[0].content_hash == info.content_hash


def test_a_bad_request_rubric_fails_the_call_and_a_bad_item_rubric_only_its_item(client):
    bad = {**_preset("summeval-coherence"), "scale": {"min": 1, "max": 1}}
    with pytest.raises(RewardServerError) as error:
        client.score([make_item(ARTICLE, SUMMARIES[0])], rubrics=[bad])
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "rubrics[0].spec.scale" in error.value.details()
    results = client.score([make_item(ARTICLE, SUMMARIES[0], rubrics=[bad]), make_item(ARTICLE, SUMMARIES[1])],
                           rubrics="summeval-coherence")
    assert results[0].error.field == "items[0].rubrics[0].spec.scale"
    assert results[1].ok


def _one_to_ten() -> dict:
    preset = _preset("summeval-coherence")
    return {**preset, "name": "engine-test-coherence-1-10", "scale": {"min": 1, "max": 10},
            "evaluation_criteria": preset["evaluation_criteria"].replace("(1-5)", "(1-10)"),
            "evaluation_steps": preset["evaluation_steps"].replace("1 to 5", "1 to 10").replace("5 is", "10 is")}


def test_a_one_to_ten_rubric_reads_10_by_chaining_on_the_embedded_judge(client):
    """SmolLM2 writes `10` as `1`,`0`: the label is read with a second engine request after `1`."""
    results = client.score([make_item(ARTICLE, summary) for summary in SUMMARIES], rubrics=[_one_to_ten()])
    for result in results:
        assert result.ok, result.error.message
        (score,) = result.scores
        distribution = dict(score.distribution)
        assert list(distribution) == [str(v) for v in range(1, 11)]
        assert sum(distribution.values()) == pytest.approx(1.0, abs=1e-9)
        assert distribution["10"] > 0.0 and 0.0 < score.label_mass <= 1.0
        assert 1.0 <= score.expected_score <= 10.0
        assert score.reward == pytest.approx((score.expected_score - 1) / 9)


def test_sampled_answers_on_a_one_to_ten_rubric_parse_to_its_labels(client):
    (result,) = client.score([make_item(ARTICLE, SUMMARIES[0])], rubrics=[_one_to_ten()], mode=Sampling(16))
    assert result.ok, result.error.message
    (score,) = result.scores
    assert list(score.distribution) == [str(v) for v in range(1, 11)]
    assert sum(score.distribution.values()) == pytest.approx(1.0)
    assert 0.0 < score.label_mass <= 1.0


def test_a_rubric_column_gives_each_row_its_rubric_in_trl_openrlhf_and_verl(client, server_address):
    """Rows read back from a Hugging Face dataset (Arrow fills the keys a row lacks with None),
    one row naming a served rubric: every adapter scores each row as its rubric served alone."""
    import datasets
    from geval_client import GEvalReward, openrlhf, verl

    served = [client.score([make_item(ARTICLE, s)], rubrics=name)[0].reward for s, name in zip(SUMMARIES, PRESETS)]
    # The first rubric spells out a default the second leaves out, so Arrow gives the second a None.
    first = {**_preset(PRESETS[0]), "reference_label": "Reference"}
    rows = datasets.Dataset.from_list([{"rubric": first}, {"rubric": _preset(PRESETS[1])}])[:]["rubric"]
    criteria = [*rows, PRESETS[2]]
    assert rows[1]["reference_label"] is None

    reward = GEvalReward(server_address, rubric_column="criteria")
    assert reward(prompts=[ARTICLE] * 3, completions=SUMMARIES, criteria=criteria) == pytest.approx(served, abs=1e-5)

    reply = openrlhf.make_reward_func(server_address)(
        [ARTICLE + " " + s for s in SUMMARIES], [ARTICLE] * 3, [{"rubrics": c} for c in criteria])
    assert reply["rewards"] == pytest.approx(served, abs=1e-5)

    scores = verl.compute_score_batch(["summeval"] * 3, SUMMARIES, [None] * 3,
                                      [{"prompt": ARTICLE, "rubrics": c} for c in criteria], server=server_address)
    assert [s["score"] for s in scores] == pytest.approx(served, abs=1e-5)
