"""The audit report's prose: figures with a sign read as words ("shorter", not "-78.6 longer")."""

import pytest
from geval_audit.checks import run_checks
from geval_audit.report import RunContext, build_sections, to_markdown

CONTEXT = RunContext(
    input="rows.jsonl", rows_read=8, row_errors=[], judge_model="judge", rubrics={"r": 1.0},
    rubric_hashes={"r": "abc"}, rubrics_using_reference=[], mode="log-probabilities",
    semscore_model=None, gate_failures=[],
)


def _pair(i, completion_words, reference_words):
    reward = 0.5 + 0.05 * i
    return {
        "key": f"k{i}", "group": f"g{i // 2}", "completion_words": completion_words,
        "reference_words": reference_words, "completion_digest": f"c{i}", "reference_digest": f"r{i}",
        "semscore": None, "preference": None, "human_scores": {},
        "completion_result": {"reward": reward, "scores": [{"rubric": "r", "reward": reward}]},
        "reference_result": {"reward": 0.4, "scores": [{"rubric": "r", "reward": 0.4}]},
    }


def _length_paragraph(completion_words, reference_words):
    records = [_pair(i, words, reference_words) for i, words in enumerate(completion_words)]
    markdown = to_markdown("Reward audit", build_sections(CONTEXT, run_checks(records, [], None, resamples=50)))
    (paragraph,) = [line for line in markdown.splitlines() if line.startswith("**Length.**")]
    return paragraph


@pytest.mark.parametrize(
    "completion_words, reference_words, expected",
    [
        ([10, 12, 14, 16, 18, 20, 22, 24], 95, "the completion is 78.0 words shorter than the reference on average"),
        ([40, 42, 44, 46, 48, 50, 52, 54], 35, "the completion is 12.0 words longer than the reference on average"),
        ([30, 34, 30, 34, 30, 34, 30, 34], 32, "the completion is as long as the reference on average"),
    ],
)
def test_the_length_paragraph_says_shorter_or_longer_by_the_differences_sign(
    completion_words, reference_words, expected
):
    paragraph = _length_paragraph(completion_words, reference_words)
    assert f"the verdict rests on, {expected}." in paragraph
    assert "-" not in paragraph.split("on average")[0]
