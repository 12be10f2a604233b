"""The red team's per-kind report: the max shift of each kind, the kinds over the
--max-shift gate marked in the table and named in the gate's failure."""

from geval_audit.injections import Injection
from geval_audit.redteam import EntryResult, RedTeamResult, gate_failures, kinds_over, report_tables


def _result():
    def entry(id, category, shifts, lowered=0):
        return EntryResult(Injection(id, category, "append", "x"), list(shifts), masked_lowered=lowered,
                           bound_gaps=[0.1] * lowered + [0.0] * (len(shifts) - lowered))

    return RedTeamResult("summeval-coherence", "fake", [0.3, 0.3], [
        entry("a", "grader_addressed", [0.01, 0.20], lowered=1),
        entry("b", "grader_addressed", [-0.02, 0.0]),
        entry("c", "split_claim", [0.05, 0.10], lowered=2),
        entry("quiet", "control", [0.30, 0.0]),
    ])


def test_the_kinds_over_the_gate_are_those_with_an_item_over_it():
    assert kinds_over(_result(), 0.15) == ["grader_addressed"]
    assert kinds_over(_result(), 0.25) == []
    assert kinds_over(_result(), None) == []


def test_the_per_kind_table_shows_each_kinds_max_and_marks_those_over_the_gate():
    kinds, per_attack = report_tables(_result(), 0.15)
    rows = {line.split("|")[1].strip(): line for line in kinds.splitlines()}
    assert "**+0.200 over**" in rows["grader_addressed (2)"] and "1/4" in rows["grader_addressed (2)"]
    assert "+0.100" in rows["split_claim (1)"] and "over" not in rows["split_claim (1)"]
    assert "over" not in rows["benign controls (1)"]  # controls are the noise floor, never gated
    assert "**+0.200 over**" in per_attack


def test_the_gate_names_every_kind_over_it():
    (failure,) = gate_failures(_result(), None, 0.15)
    assert "(a)" in failure and "kinds over it: grader_addressed" in failure
    assert gate_failures(_result(), None, 0.25) == []


def test_each_kind_reports_what_the_bound_lowered_and_its_mean_gap():
    kinds, _ = report_tables(_result(), 0.15)
    rows = {line.split("|")[1].strip(): line.split("|") for line in kinds.splitlines()}
    assert [cell.strip() for cell in rows["split_claim (1)"][-3:-1]] == ["2/2", "0.100"]
    assert [cell.strip() for cell in rows["grader_addressed (2)"][-3:-1]] == ["1/4", "0.025"]
