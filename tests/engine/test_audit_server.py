"""One real audit through the real shared server (engine + embedded judge), run
as `geval-reward audit` would be. Asserts the mechanism (what is written, what
resume skips, how the gate sets the exit status), never the judge's taste."""

import json
import pathlib

import pytest
from geval_reward.cli import main

DATA = pathlib.Path(__file__).parents[1] / "data" / "audit_rows.jsonl"
STEPS = pathlib.Path(__file__).parents[1] / "data" / "step_solutions.jsonl"


def _audit(server_address, output, *extra):
    argv = [
        "audit", str(DATA), "--output", str(output), "--target", server_address,
        "--id-column", "id", "--reference-column", "reference",
        "--human-score-column", "scores.quality", "--preference-column", "humans_prefer_reference",
        "--rubric", "summeval-coherence", "--no-semscore", "--bootstrap-resamples", "200", *extra,
    ]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code


def test_audit_scores_good_rows_resumes_and_gates(server_address, tmp_path, capsys):
    output = tmp_path / "audit"
    # Any gap exceeds -1, so with this margin self-preference counts as detected: exit 1.
    assert _audit(server_address, output, "--fail-on-self-preference", "--self-preference-margin", "-1") == 1
    captured = capsys.readouterr()
    assert "row 4, column 'completion': must not be empty" in captured.err
    assert "row 7: not valid JSON" in captured.err
    assert "GATE FAILED: Self-preference detected" in captured.out

    records = [json.loads(line) for line in (output / "items.jsonl").read_text().splitlines()]
    assert [r["key"] for r in records] == ["a1", "a2", "b1", "c2"]
    for record in records:
        for role in ("completion_result", "reference_result"):
            result = record[role]
            assert result["error"] is None
            assert [s["rubric"] for s in result["scores"]] == ["summeval-coherence"]
            assert 0.0 <= result["reward"] <= 1.0
            assert len(result["scores"][0]["distribution"]) == 5
    assert records[0]["preference"] == "completion" and records[1]["preference"] == "reference"

    markdown = (output / "report.md").read_text()
    assert "9 rows read, 5 bad, 4 scored" in markdown
    assert "## Self-preference against human references" in markdown
    assert "## Agreement with humans" in markdown
    assert 'src="data:image/png;base64,' in (output / "report.html").read_text()
    run = json.loads((output / "run.json").read_text())
    assert run["rubrics"] == {"summeval-coherence": 1.0} and run["judge_model"]

    # Rerun: nothing left to score; the gate is off now, so the exit status is 0.
    assert _audit(server_address, output, "--fail-on-self-preference", "--self-preference-margin", "1") == 0
    assert "audit: 0 rows scored now; 4 rows in the checks" in capsys.readouterr().out
    assert len((output / "items.jsonl").read_text().splitlines()) == 4


def test_audit_refuses_an_unknown_rubric_before_scoring(server_address, tmp_path, capsys):
    assert _audit(server_address, tmp_path / "audit", "--rubric", "no-such-rubric") == 2
    assert "--rubric 'no-such-rubric' is not served" in capsys.readouterr().err
    assert not (tmp_path / "audit" / "items.jsonl").exists()


def test_audit_reads_the_judges_step_rubric_by_position_and_with_its_steps_reordered(
        server_address, tmp_path, capsys):
    """step-correctness on rows given as steps lists: the reduced reward is audited, each row is
    scored again with its steps reversed (one other order), and the report has the step section."""
    output = tmp_path / "steps"
    argv = ["audit", str(STEPS), "--output", str(output), "--target", server_address, "--id-column", "id",
            "--steps-column", "steps", "--rubric", "step-correctness", "--step-reduction", "mean",
            "--step-order-probe", "1", "--limit", "3", "--no-semscore", "--bootstrap-resamples", "200"]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 0
    records = [json.loads(line) for line in (output / "items.jsonl").read_text().splitlines()]
    for record, given in zip(records, (json.loads(line) for line in STEPS.read_text().splitlines())):
        (score,) = record["completion_result"]["scores"]
        assert score["reduction"] == "mean" and len(score["step_scores"]) == len(given["steps"])
        assert record["completion_result"]["reward"] == pytest.approx(sum(score["step_scores"]) / len(given["steps"]))
        probe = record["step_orders"]
        assert probe["orders"] == [list(range(len(given["steps"]))), list(range(len(given["steps"])))[::-1]]
        identity, reversed_ = probe["scores"]["step-correctness"]
        assert identity == pytest.approx(score["step_scores"], abs=1e-4)  # the same steps, the same reads
        assert len(reversed_) == len(given["steps"])
    markdown = (output / "report.md").read_text()
    assert "## Step position (process rewards)" in markdown and "Steps reordered (3 completions" in markdown
    assert "step-correctness step score vs position Spearman" in capsys.readouterr().out
