"""`geval-reward audit` argument and input errors that stop it before any scoring
(exit status 2, a message naming what to change), and the CI gates' logic."""

import pathlib

import pytest
from geval_audit.checks import run_checks
from geval_audit.inputs import Columns
from geval_audit.runner import AuditConfig, gate_failures
from geval_reward.cli import main

DATA = pathlib.Path(__file__).parents[1] / "data" / "audit_rows.jsonl"
NO_SERVER = "127.0.0.1:1"  # never reached: these fail before connecting


def _exit_code(*argv):
    with pytest.raises(SystemExit) as exit_info:
        main(["audit", *map(str, argv)])
    return exit_info.value.code


def test_a_missing_column_stops_the_audit_before_scoring(tmp_path, capsys):
    assert _exit_code(DATA, "-o", tmp_path / "out", "--target", NO_SERVER, "--completion-column", "answer") == 2
    assert "column 'answer' is in no row of the input" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--fail-on-self-preference"], "--fail-on-self-preference needs --reference-column"),
        (["--min-agreement", "0.3"], "--min-agreement needs at least one --human-score-column"),
        (["--batch-size", "0"], "--batch-size must be at least 1, got 0"),
        (["--rubric", "a", "--rubric", "a:2"], "--rubric: a rubric is named twice"),
        (["--reasoning-tokens", "0"], "--reasoning-tokens must be at least 1, got 0"),
        (["--sampling-n", "4", "--reasoning-tokens", "64"], "give --sampling-n or --reasoning-tokens, not both"),
    ],
)
def test_inconsistent_flags_are_refused(tmp_path, capsys, flags, message):
    assert _exit_code(DATA, "-o", tmp_path / "out", "--target", NO_SERVER, *flags) == 2
    assert message in capsys.readouterr().err


def _record(key, group, words, reward, reference_reward, human):
    return {
        "key": key, "group": group, "completion_words": words, "reference_words": 5,
        "completion_digest": key, "reference_digest": f"reference of {key}",
        "semscore": None, "preference": None,
        "human_scores": {"h": human},
        "completion_result": {"reward": reward, "scores": [{"rubric": "r", "reward": reward}]},
        "reference_result": {"reward": reference_reward, "scores": [{"rubric": "r", "reward": reference_reward}]},
    }


def test_gates_fail_on_self_preference_length_bias_and_low_agreement(tmp_path):
    # Longer completions score higher, above their references, against the human ranking.
    records = [_record(f"k{i}", f"g{i // 3}", 10 * (i + 1), 0.1 * i, 0.0, -i) for i in range(9)]
    checks = run_checks(records, ["h"], semscore_model=None, resamples=200)
    base = AuditConfig(input=DATA, output=tmp_path, columns=Columns(reference="reference", human_scores=("h",)))
    assert gate_failures(base, checks) == []
    strict = AuditConfig(
        input=DATA, output=tmp_path, columns=base.columns, fail_on_self_preference=True,
        max_length_correlation=0.5, min_agreement=0.0,
    )
    failures = gate_failures(strict, checks)
    assert [f.split(":")[0] for f in failures] == ["Self-preference detected", "Length bias", "Agreement with h"]
