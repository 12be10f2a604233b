"""Audit input parsing: formats, column mapping, bad rows named by row and column."""

import csv
import json
import pathlib

import pytest
from geval_audit.inputs import Columns, InputError, check_columns, parse_rows, read_records

DATA = pathlib.Path(__file__).parents[1] / "data" / "audit_rows.jsonl"
COLUMNS = Columns(
    id="id", reference="reference", human_scores=("scores.quality",), preference="humans_prefer_reference"
)


def test_bad_rows_are_named_by_row_and_column_and_the_rest_is_read():
    rows, errors = parse_rows(read_records(DATA), COLUMNS)
    assert [r.key for r in rows] == ["a1", "a2", "b1", "c2"]
    named = {(e.row, e.column) for e in errors}
    assert named == {(4, "completion"), (5, "scores.quality"), (6, "humans_prefer_reference"), (7, None), (9, "id")}
    messages = {e.row: str(e) for e in errors}
    assert messages[4] == "row 4, column 'completion': must not be empty"
    assert "'high'" in messages[5] and "number" in messages[5]
    assert "'maybe'" in messages[6]
    assert messages[7].startswith("row 7: not valid JSON")
    assert "repeats the id 'a1'" in messages[9]


def test_rows_carry_mapped_values():
    rows, _ = parse_rows(read_records(DATA), COLUMNS)
    first, _, equal, last = rows
    assert first.human_scores == {"scores.quality": 4.0}
    assert first.preference == "completion"  # humans_prefer_reference: false
    assert equal.preference == "equal"  # "Equally Good"
    assert last.preference == "reference"
    assert first.group == first.prompt  # grouped by prompt text by default
    assert first.reference.startswith("A new library")


def test_a_column_absent_from_every_row_stops_the_audit_and_lists_the_columns():
    records = read_records(DATA)
    with pytest.raises(InputError, match=r"column 'answer' is in no row.*'completion'.*'prompt'"):
        check_columns(records, Columns(completion="answer"))


def test_row_numbers_default_to_position_and_chat_prompts_are_accepted():
    records = [
        {"prompt": [{"role": "user", "content": "Hi"}], "completion": "Hello!"},
        {"prompt": [{"role": "user"}], "completion": "Hello!"},
    ]
    rows, errors = parse_rows(records, Columns())
    assert rows[0].key == "row-1"
    assert rows[0].prompt == [{"role": "user", "content": "Hi"}]
    assert str(errors[0]) == "row 2, column 'prompt': message 0 must have text 'role' and 'content'"


def _plain_records():
    return [
        {"prompt": "P1", "completion": "first", "human": 3.0},
        {"prompt": "P1", "completion": "second", "human": 4.0},
    ]


def test_csv_parquet_and_saved_datasets_read_like_jsonl(tmp_path):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = _plain_records()
    with (tmp_path / "rows.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "rows.parquet")
    datasets.Dataset.from_list(records).save_to_disk(str(tmp_path / "rows_dataset"))
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    columns = Columns(human_scores=("human",))
    parsed = {
        name: parse_rows(read_records(tmp_path / name), columns)[0]
        for name in ("rows.jsonl", "rows.csv", "rows.parquet", "rows_dataset")
    }
    expected = [(r.completion, r.human_scores) for r in parsed["rows.jsonl"]]
    assert expected == [("first", {"human": 3.0}), ("second", {"human": 4.0})]
    for name, rows in parsed.items():
        assert [(r.completion, r.human_scores) for r in rows] == expected, name


def test_a_saved_dataset_dict_needs_a_split(tmp_path):
    import datasets

    path = tmp_path / "dataset_dict"
    datasets.DatasetDict({"test": datasets.Dataset.from_list(_plain_records())}).save_to_disk(str(path))
    with pytest.raises(InputError, match=r"--split.*\['test'\]"):
        read_records(path)
    assert len(read_records(path, split="test")) == 2


def test_unknown_file_type_and_missing_file_are_clear(tmp_path):
    (tmp_path / "rows.txt").write_text("x")
    with pytest.raises(InputError, match="--format"):
        read_records(tmp_path / "rows.txt")
    with pytest.raises(InputError, match="no such file"):
        read_records(tmp_path / "absent.jsonl")
