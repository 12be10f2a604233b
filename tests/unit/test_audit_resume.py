"""Resuming an interrupted audit, and the report files. The scoring client here
is a fake: these test the bookkeeping, not the judge (test_audit_server.py
runs a real audit)."""

import dataclasses
import json

import pytest
from geval_audit.checks import run_checks
from geval_audit.inputs import AuditRow
from geval_audit.report import RunContext, build_sections, to_html, to_markdown
from geval_audit.row_scoring import SEMSCORE, ScoringOptions, ServerUnavailable, score_rows
from geval_audit.store import ItemStore, OutputMismatch
from geval_client.pb import reward_pb2
from geval_client.types import Logprobs, item_result

OPTIONS = ScoringOptions(rubrics={"r": 1.0}, batch_size=2)


class LengthRewardClient:
    """Rewards a text by its length, gives SemScore 0.5; can fail after a number of calls."""

    def __init__(self, fail_after_calls=None, unavailable=()):
        self.sent = []
        self.items = []
        self.calls = 0
        self.fail_after_calls = fail_after_calls
        self.unavailable = set(unavailable)

    def score(self, items, rubrics=None, mode=Logprobs(), steps=None):
        if self.fail_after_calls is not None and self.calls >= self.fail_after_calls:
            raise KeyboardInterrupt  # the operator stops the run mid-way
        self.calls += 1
        results = []
        for item in items:
            self.items.append(item)
            self.sent.append(item["completion"])
            if item["completion"] in self.unavailable:
                error = reward_pb2.ItemError(code=reward_pb2.ERROR_CODE_UNAVAILABLE, message="engine down")
                results.append(item_result(reward_pb2.ItemResult(error=error)))
                continue
            if rubrics == SEMSCORE:
                score = reward_pb2.RubricScore(rubric=SEMSCORE, reward=0.5,
                                               semscore=reward_pb2.SemScoreResult(cosine=0.5))
                results.append(item_result(reward_pb2.ItemResult(reward=0.5, scores=[score])))
                continue
            reward = min(1.0, len(item["completion"]) / 100)
            score = reward_pb2.RubricScore(rubric="r", reward=reward,
                                           geval=reward_pb2.GEvalResult(expected_score=1 + 4 * reward))
            results.append(item_result(reward_pb2.ItemResult(reward=reward, scores=[score])))
        return results


def _rows(n=5):
    return [
        AuditRow(row=i + 1, key=f"k{i}", group=f"prompt {i // 2}", prompt=f"prompt {i // 2}",
                 completion=f"model text {i} " * (i + 1), reference=f"human text {i}",
                 human_scores={"h": float(i % 3)}, preference="reference" if i % 2 else "completion")
        for i in range(n)
    ]


def _lines(store):
    return store.items_path.read_text().splitlines()


def test_an_interrupted_audit_resumes_without_rescoring(tmp_path):
    store = ItemStore(tmp_path / "out")
    store.open_run({"rubrics": {"r": 1.0}})
    rows = _rows()
    with pytest.raises(KeyboardInterrupt):
        score_rows(rows, LengthRewardClient(fail_after_calls=1), store, OPTIONS)
    assert [json.loads(line)["key"] for line in _lines(store)] == ["k0", "k1"]
    with store.items_path.open("a") as handle:
        handle.write('{"key": "k2", "row": 3, "complet')  # a write cut short by the interruption

    client = LengthRewardClient()
    assert score_rows(rows, client, store, OPTIONS) == 3
    assert set(client.sent) == {t for r in rows[2:] for t in (r.completion, r.reference)}
    records = [json.loads(line) for line in _lines(store)]
    assert [r["key"] for r in records] == ["k0", "k1", "k2", "k3", "k4"]
    assert records[2]["completion_result"]["reward"] == pytest.approx(len(rows[2].completion) / 100)

    again = LengthRewardClient()
    assert score_rows(rows, again, store, OPTIONS) == 0
    assert again.sent == []


def test_repeated_texts_are_scored_once(tmp_path):
    row = _rows(1)[0]
    twins = [row, AuditRow(**{**row.__dict__, "row": 9, "key": "twin"})]
    client = LengthRewardClient()
    store = ItemStore(tmp_path / "out")
    score_rows(twins, client, store, OPTIONS)
    assert sorted(client.sent) == sorted([row.completion, row.reference])
    assert [json.loads(line)["key"] for line in _lines(store)] == ["k0", "twin"]


def test_references_go_along_only_when_a_rubric_reads_them(tmp_path):
    row = _rows(1)[0]
    other_reference = AuditRow(**{**row.__dict__, "row": 2, "key": "k-other", "reference": "another human text"})
    client = LengthRewardClient()
    score_rows([row, other_reference], client, ItemStore(tmp_path / "plain"), OPTIONS)
    # The model text is one request although its rows carry different references.
    assert sorted(client.sent) == sorted([row.completion, row.reference, "another human text"])
    assert all("reference" not in item for item in client.items)

    client = LengthRewardClient()
    with_reference = ScoringOptions(rubrics={"r": 1.0}, batch_size=2, send_references=True)
    score_rows([row, other_reference], client, ItemStore(tmp_path / "reads"), with_reference)
    assert client.sent.count(row.completion) == 2
    assert {item["reference"] for item in client.items} == {row.reference, "another human text"}


def test_rows_the_server_could_not_score_for_now_are_not_written(tmp_path):
    store = ItemStore(tmp_path / "out")
    rows = _rows(4)
    client = LengthRewardClient(unavailable={rows[1].completion})
    with pytest.raises(ServerUnavailable, match="row 2: UNAVAILABLE: engine down.*rerun to resume"):
        score_rows(rows, client, store, OPTIONS)
    assert [json.loads(line)["key"] for line in _lines(store)] == ["k0"]


def test_resuming_with_other_settings_is_refused(tmp_path):
    store = ItemStore(tmp_path / "out")
    store.open_run({"rubrics": {"r": 1.0}, "judge_model": "j"})
    score_rows(_rows(2), LengthRewardClient(), store, OPTIONS)
    with pytest.raises(OutputMismatch, match=r"different \['rubrics'\]"):
        store.open_run({"rubrics": {"other": 1.0}, "judge_model": "j"})
    store.open_run({"rubrics": {"r": 1.0}, "judge_model": "j"})  # same settings: fine


def test_report_names_the_semscore_model_and_embeds_plots(tmp_path):
    store = ItemStore(tmp_path / "out")
    rows = _rows(6)
    score_rows(rows, LengthRewardClient(), store, dataclasses.replace(OPTIONS, semscore=True))
    records = list(store.load().values())
    checks = run_checks(records, ["h"], semscore_model="test-embedder (package x)", resamples=200)
    context = RunContext(
        input="rows.jsonl", rows_read=6, row_errors=[], judge_model="judge", rubrics={"r": 1.0},
        rubric_hashes={"r": "abc"}, rubrics_using_reference=[], mode="log-probabilities",
        semscore_model="test-embedder (package x)", gate_failures=[],
    )
    sections = build_sections(context, checks)
    assert [s.title for s in sections] == [
        "Run", "Self-preference against human references", "Length bias", "SemScore", "Agreement with humans",
    ]
    markdown = to_markdown("Reward audit", sections)
    page = to_html("Reward audit", sections)
    assert markdown.count("test-embedder (package x)") >= 2 and "test-embedder (package x)" in page
    assert "| humans prefer the reference (human text) | 3 |" in markdown
    assert page.count('src="data:image/png;base64,') == 5
    assert "<script" not in page and "http" not in page  # self-contained


def test_without_a_terminal_progress_goes_to_stderr_as_plain_lines(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("geval_audit.row_scoring.PROGRESS_EVERY_S", 0.0)
    score_rows(_rows(5), LengthRewardClient(), ItemStore(tmp_path / "out"), OPTIONS)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("audit: ")]
    assert lines[-1].startswith("audit: 5/5 rows scored in ")
    assert len(lines) == 3  # batches of 2: after 2, 4 and 5 rows


def test_the_report_warns_when_per_prompt_correlations_rest_on_two_texts(tmp_path):
    store = ItemStore(tmp_path / "out")
    score_rows(_rows(6), LengthRewardClient(), store, OPTIONS)  # each prompt: one completion, one reference
    checks = run_checks(list(store.load().values()), ["h"], semscore_model=None, resamples=100)
    context = RunContext(
        input="rows.jsonl", rows_read=6, row_errors=[], judge_model="judge", rubrics={"r": 1.0},
        rubric_hashes={"r": "abc"}, rubrics_using_reference=[], mode="log-probabilities",
        semscore_model=None, gate_failures=[],
    )
    markdown = to_markdown("Reward audit", build_sections(context, checks))
    assert "have only two texts, whose rank correlation can only be +1 or -1" in markdown


class ComparingClient(LengthRewardClient):
    """Also compares a completion with its reference: the longer text wins with 0.8."""

    def __init__(self):
        super().__init__()
        self.groups = []

    def score_groups(self, groups, rubrics=None, schedule=None):
        from geval_client.types import group_result

        assert schedule == "anchor"
        self.groups += groups
        results = []
        for group in groups:
            win = 0.8 if len(group["completions"][0]) > len(group["reference"]) else 0.2
            results.append(group_result(reward_pb2.GroupResult(
                schedule=reward_pb2.SCHEDULE_ANCHOR, completions=[reward_pb2.CompletionResult(reward=win)])))
        return results


def test_self_preference_read_as_a_comparison(tmp_path):
    store = ItemStore(tmp_path / "out")
    store.open_run({"rubrics": {"r": 1.0}})
    rows = _rows(4)
    client = ComparingClient()
    score_rows(rows, client, store, dataclasses.replace(OPTIONS, compare=True))
    assert [g["reference"] for g in client.groups] == [r.reference for r in rows]
    records = [json.loads(line) for line in _lines(store)]
    assert [r["comparison_win"] for r in records] == [0.8] * 4  # the model texts are the longer ones
    checks = run_checks(records, ["h"], None, resamples=200)
    assert checks.comparison.value == pytest.approx(0.8) and checks.comparison.excludes(0.5) == "above"
    context = RunContext(input="in.jsonl", rows_read=4, row_errors=[], judge_model="fake", rubrics={"r": 1.0},
                         rubric_hashes={"r": "h"}, rubrics_using_reference=[], mode="logprobs",
                         semscore_model=None, gate_failures=[])
    assert "P(completion beats reference) 0.800" in to_markdown("audit", build_sections(context, checks))
