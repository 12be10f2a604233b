"""The audit's step-position check on process rewards: a scorer whose step scores fall with the
step's index whatever it says is flagged by the reordering probe; one that reads only the
step's content is not, even where the data's later steps are worse. The scoring client is a
fake that splits and scores steps as the server's process rewards do (blank lines, or the
item's own steps); test_audit_server.py runs the check on the real judge."""

import dataclasses
import json
import re
import zlib

import pytest
from geval_audit.checks import run_checks
from geval_audit.cli import config_from_args
from geval_audit.inputs import AuditRow, Columns, parse_rows
from geval_audit.report import RunContext, build_sections, to_markdown
from geval_audit.row_scoring import ScoringOptions, score_rows
from geval_audit.runner import AuditError, gate_failures
from geval_audit.step_position import probe_orders, within_step_slope
from geval_audit.store import ItemStore
from geval_client.pb import reward_pb2
from geval_client.types import Logprobs, item_result

RUBRIC = "step-correctness"


def falls_with_index(text: str, index: int) -> float:
    return 0.9 - 0.1 * index


def reads_content(text: str, index: int) -> float:
    """A score fixed by the step's text alone; a step saying "wrong" scores low."""
    return 0.1 if "wrong" in text else 0.5 + (zlib.crc32(text.encode()) % 40) / 100


class StepClient:
    """Scores each step with step_score(text, index), steps split on blank lines or given."""

    def __init__(self, step_score):
        self.step_score = step_score
        self.calls = []

    def score(self, items, rubrics=None, mode=Logprobs(), steps=None):
        self.calls.append((items, rubrics, steps))
        results = []
        for item in items:
            completion = item.get("completion") or "\n\n".join(item["steps"])
            pieces = item.get("steps") or [p.strip() for p in re.split(r"\n\s*\n", completion) if p.strip()]
            starts = [completion.index(p) for p in pieces]
            scores = [self.step_score(p, i) for i, p in enumerate(pieces)]
            result = reward_pb2.ProcessRewardResult(step_scores=scores, step_starts=starts,
                                                    step_ends=[s + len(p) for s, p in zip(starts, pieces)],
                                                    reduction="min")
            score = reward_pb2.RubricScore(rubric=RUBRIC, reward=min(scores), process_reward=result)
            results.append(item_result(reward_pb2.ItemResult(reward=min(scores), scores=[score])))
        return results


def _rows(n=12, steps=4, worse_later=False):
    rows = []
    for i in range(n):
        pieces = [f"Problem {i}, step {k}: " + ("this is wrong" if worse_later and k >= 2 else f"fact {i * 7 + k}")
                  for k in range(steps)]
        rows.append(AuditRow(row=i + 1, key=f"k{i}", group=f"p{i}", prompt=f"Problem {i}",
                             completion="\n\n".join(pieces)))
    return rows


def _audit(tmp_path, step_score, rows, orders=3):
    store = ItemStore(tmp_path / "out")
    client = StepClient(step_score)
    score_rows(rows, client, store, ScoringOptions(rubrics={RUBRIC: 1.0}, batch_size=5, step_orders=orders))
    records = [json.loads(line) for line in store.items_path.read_text().splitlines()]
    return run_checks(records, [], None, resamples=300), records, client


def test_scores_that_fall_with_the_index_whatever_the_step_says_are_flagged(tmp_path):
    checks, records, _ = _audit(tmp_path, falls_with_index, _rows())
    (found,) = checks.step_position
    assert found.rubric == RUBRIC and found.completions == 12
    assert found.trend.spearman.value == pytest.approx(-1.0)
    assert [index for index, _ in found.by_index] == ["1", "2", "3", "4"]
    assert [mean.value for _, mean in found.by_index] == pytest.approx([0.9, 0.8, 0.7, 0.6])
    assert found.probe.value == pytest.approx(-0.1) and found.probe.high < 0
    assert found.probe_orders == 4 and found.detected
    markdown = to_markdown("Reward audit", build_sections(_context(), checks))
    assert "## Step position (process rewards)" in markdown
    assert "**Warning: the scores fall with position alone**" in markdown
    assert "no longer reasons in order" in markdown


def test_scores_that_read_only_the_content_are_not_flagged(tmp_path):
    checks, _, _ = _audit(tmp_path, reads_content, _rows())
    (found,) = checks.step_position
    assert found.probe.value == pytest.approx(0.0, abs=1e-12) and not found.detected
    assert "Warning" not in to_markdown("Reward audit", build_sections(_context(), checks))


def test_later_steps_that_are_worse_fall_observed_but_not_with_the_content_held_fixed(tmp_path):
    checks, _, _ = _audit(tmp_path, reads_content, _rows(worse_later=True))
    (found,) = checks.step_position
    assert found.trend.spearman.high < 0  # observed: the later steps score lower...
    assert found.probe.value == pytest.approx(0.0, abs=1e-12) and not found.detected  # ...for what they say


def test_the_probe_sends_each_order_as_a_list_of_the_same_steps(tmp_path):
    rows = _rows(n=2, steps=3)
    _, records, client = _audit(tmp_path, falls_with_index, rows, orders=2)
    probe_items = [item for items, _, _ in client.calls for item in items if "completion" not in item]
    original = rows[0].completion.split("\n\n")
    assert [item["steps"] for item in probe_items[:3]] == [
        original, original[::-1], original[1:] + original[:1]]
    assert records[0]["step_orders"]["orders"] == [[0, 1, 2], [2, 1, 0], [1, 2, 0]]
    assert records[0]["step_orders"]["scores"][RUBRIC][1] == pytest.approx([0.9, 0.8, 0.7])


def test_a_completion_repeated_across_rows_is_probed_once(tmp_path):
    (row,) = _rows(n=1, steps=3)
    twin = dataclasses.replace(row, row=2, key="twin")
    _, records, client = _audit(tmp_path, falls_with_index, [row, twin], orders=2)
    (probe_call,) = [items for items, _, _ in client.calls if "completion" not in items[0]]
    assert len(probe_call) == 3  # the identity, the reversal, one rotation: once for both rows
    assert records[0]["step_orders"] == records[1]["step_orders"]


def test_without_the_probe_the_check_is_observational_only(tmp_path):
    checks, records, client = _audit(tmp_path, falls_with_index, _rows(n=4), orders=0)
    (found,) = checks.step_position
    assert found.probe is None and not found.detected and len(client.calls) == 1
    assert "step_orders" not in records[0]
    assert "Not probed with reordered steps" in to_markdown("Reward audit", build_sections(_context(), checks))


def test_a_single_step_completion_is_not_probed_and_a_failed_order_is_left_out():
    assert probe_orders(1, 3) == [[0]]
    assert probe_orders(2, 3) == [[0, 1], [1, 0]]
    assert within_step_slope([[0, 1]], [[0.5, 0.4]]) is None  # no step moved
    assert within_step_slope([[0, 1], [1, 0]], [[0.5, 0.4], None]) is None
    assert within_step_slope([[0, 1, 2], [2, 1, 0], [1, 2, 0]], [[0.9, 0.8, 0.7], None, [0.9, 0.8, 0.7]]) == (
        pytest.approx(-0.1))


def test_the_gate_fails_only_when_asked_and_detected(tmp_path):
    checks, _, _ = _audit(tmp_path, falls_with_index, _rows())
    config = config_from_args(_args(step_order_probe=3, fail_on_step_position=True))
    (failure,) = gate_failures(config, checks)
    assert failure.startswith(f"Step position: {RUBRIC}'s step scores fall with position alone")
    assert gate_failures(dataclasses.replace(config, fail_on_step_position=False), checks) == []
    with pytest.raises(AuditError, match="--fail-on-step-position needs --step-order-probe"):
        config_from_args(_args(fail_on_step_position=True))


def test_step_options_and_a_steps_column_reach_the_request(tmp_path):
    config = config_from_args(_args(step_delimiter="##", step_reduction="mean", steps_column="steps"))
    assert config.steps == {"delimiter": "##", "reduction": "mean"} and config.columns.steps == "steps"
    assert config_from_args(_args()).steps is None
    rows, errors = parse_rows([{"prompt": "p", "steps": ["a", "b"]},
                               {"prompt": "p", "completion": "a then b", "steps": ["a", "b"]},
                               {"prompt": "p", "steps": ["a", ""]}], Columns(steps="steps"))
    assert [r.completion for r in rows] == ["a\n\nb", "a then b"] and rows[0].steps == ["a", "b"]
    assert [str(e) for e in errors] == [
        "row 3, column 'steps': must be a list of non-empty texts (the completion's steps)"]
    client = StepClient(falls_with_index)
    score_rows(rows, client, ItemStore(tmp_path / "out"),
               ScoringOptions(rubrics={RUBRIC: 1.0}, steps={"reduction": "mean"}))
    items, _, steps = client.calls[0]
    assert [item["steps"] for item in items] == [["a", "b"], ["a", "b"]] and steps == {"reduction": "mean"}


def _args(**overrides):
    import argparse

    from geval_audit.cli import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    values = vars(parser.parse_args(["audit", "rows.jsonl", "-o", "out"]))
    values.update(overrides)
    return argparse.Namespace(**values)


def _context():
    return RunContext(input="rows.jsonl", rows_read=12, row_errors=[], judge_model="judge", rubrics={RUBRIC: 1.0},
                      rubric_hashes={RUBRIC: "abc"}, rubrics_using_reference=[], mode="log-probabilities",
                      semscore_model=None, gate_failures=[])
