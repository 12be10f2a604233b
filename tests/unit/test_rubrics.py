"""Rubric presets and custom rubric files."""

import pathlib

import pytest
from geval_server.scorers.geval.rubrics import DEFAULT_RUBRIC, RubricError, load_rubric, load_rubrics

PRESETS = {
    "summeval-coherence": (1, 5), "summeval-consistency": (1, 5), "summeval-fluency": (1, 3),
    "summeval-relevance": (1, 5), "topical-chat-naturalness": (1, 3), "topical-chat-coherence": (1, 3),
    "topical-chat-engagingness": (1, 3), "topical-chat-groundedness": (0, 1),
    "reference-match": (1, 5), "overall-quality": (1, 5),
}


def test_presets_load_with_their_scales():
    rubrics = load_rubrics()
    assert DEFAULT_RUBRIC in rubrics
    for name, (low, high) in PRESETS.items():
        assert (rubrics[name].scale.min_score, rubrics[name].scale.max_score) == (low, high), name
        assert rubrics[name].evaluation_steps, name
    assert rubrics["reference-match"].uses_reference
    assert rubrics["topical-chat-groundedness"].scale.labels == ("0", "1")


def test_custom_rubrics_load_and_may_omit_steps():
    rubrics = load_rubrics([pathlib.Path(__file__).parents[1] / "rubrics"])
    custom = rubrics["test-clarity-autocot"]
    assert custom.evaluation_steps is None and not custom.steps_generated
    assert custom.source_label == "Question"
    assert not rubrics["test-toxicity"].scale.higher_is_better


def _write(tmp_path, text):
    path = tmp_path / "r.toml"
    path.write_text(text)
    return path


GOOD = """
name = "x"
criterion = "X"
task_introduction = "Rate it."
evaluation_criteria = "X (1-5)."
[scale]
min = 1
max = 5
"""


@pytest.mark.parametrize(
    "text, message",
    [
        (GOOD.replace('criterion = "X"\n', ""), "'criterion' is required"),
        (GOOD.replace("max = 5", "max = 1"), "scale.max (1) must be greater than scale.min (1)"),
        (GOOD.replace("max = 5", 'max = "5"'), "scale.min and scale.max must be integers"),
        ('colour = "red"\n' + GOOD, "unknown field(s) ['colour']"),
        (GOOD + 'step = 1\n', "unknown field(s) in [scale]: ['step']"),
        (GOOD.replace('name = "x"', 'name = ""'), "'name' is required"),
        (GOOD.replace("[scale]\nmin = 1\nmax = 5\n", ""), "[scale]"),
        ("name = ", "cannot read rubric"),
    ],
)
def test_bad_rubric_files_name_the_file_and_field(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(RubricError) as error:
        load_rubric(path)
    assert message in str(error.value)
    assert str(path) in str(error.value)


def test_missing_rubric_path_is_an_error(tmp_path):
    with pytest.raises(RubricError, match="no such rubric file"):
        load_rubrics([tmp_path / "absent.toml"])


def test_content_hash_tracks_prompt_text_and_judge(tmp_path):
    rubric = load_rubric(_write(tmp_path, GOOD))
    same = load_rubric(_write(tmp_path, GOOD))
    changed = load_rubric(_write(tmp_path, GOOD.replace("Rate it.", "Rate it well.")))
    assert rubric.content_hash("judge-a") == same.content_hash("judge-a")
    assert rubric.content_hash("judge-a") != rubric.content_hash("judge-b")
    assert rubric.content_hash("judge-a") != changed.content_hash("judge-a")
    assert rubric.with_generated_steps("1. Read.").content_hash("judge-a") != rubric.content_hash("judge-a")
