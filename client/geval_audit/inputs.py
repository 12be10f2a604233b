"""Audit inputs: JSONL, CSV, Parquet or a `datasets` dataset saved with
save_to_disk, read into rows with columns mapped by the caller.

A column missing from the whole input stops the audit before any scoring (a
mapping mistake). A bad value in one row becomes a RowError naming the row
(counted from 1 in input order) and the column; the other rows go on.
"""

from __future__ import annotations

import csv
import json
import math
import pathlib
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("jsonl", "csv", "parquet", "dataset")
PREFERENCES = ("reference", "completion", "equal")
_PREFERENCE_WORDS = {
    "true": "reference", "1": "reference", "reference": "reference", "human": "reference",
    "false": "completion", "0": "completion", "completion": "completion", "model": "completion",
    "equal": "equal", "equally good": "equal", "tie": "equal", "same": "equal",
}


class InputError(ValueError):
    """The input as a whole cannot be audited (unreadable, a mapped column absent)."""


@dataclass(frozen=True)
class RowError:
    row: int
    column: str | None
    message: str

    def __str__(self) -> str:
        where = f"row {self.row}" + (f", column {self.column!r}" if self.column else "")
        return f"{where}: {self.message}"


class _BadValue(ValueError):
    def __init__(self, column: str | None, message: str) -> None:
        super().__init__(message)
        self.column = column


@dataclass(frozen=True)
class Columns:
    """Input column names; a dotted name (scores.coherence) reaches into nested records."""

    completion: str = "completion"
    prompt: str = "prompt"
    reference: str | None = None
    id: str | None = None
    group: str | None = None  # what ties completions of one prompt; default the prompt text
    human_scores: tuple[str, ...] = ()
    preference: str | None = None  # humans' choice between reference and completion
    steps: str | None = None  # the completion's reasoning steps as a list, for process rewards

    def mapped(self) -> list[str]:
        names = [self.completion, self.prompt, self.reference, self.id, self.group, self.preference, self.steps]
        return [n for n in names if n] + list(self.human_scores)

    def required(self) -> list[str]:
        """The mapped columns some row must hold: with a steps column the completion may be absent
        from every row (each is then its steps joined by blank lines)."""
        return [name for name in self.mapped() if not (self.steps and name == self.completion)]


@dataclass(frozen=True)
class AuditRow:
    row: int
    key: str  # the id column's value, else "row-N": what resume matches on
    group: str
    prompt: str | list[dict[str, str]]
    completion: str
    reference: str | None = None
    human_scores: dict[str, float] = field(default_factory=dict)
    preference: str | None = None  # one of PREFERENCES
    steps: list[str] | None = None  # the row's own steps, sent with the completion for process rewards


_ENDINGS = {"jsonl": (".jsonl", ".json"), "csv": (".csv",), "parquet": (".parquet", ".pq")}


def detect_format(path: pathlib.Path) -> str:
    if path.is_dir():
        return "dataset"
    for fmt, endings in _ENDINGS.items():
        if path.name.lower().endswith(endings):
            return fmt
    raise InputError(f"{path}: cannot tell the format from the name; pass --format ({', '.join(FORMATS)})")


def read_records(path: pathlib.Path, fmt: str | None = None, split: str | None = None) -> list[Any]:
    """Raw records in input order; a JSONL line that is not a JSON object stays a
    string so that parse_rows reports it as that row's error."""
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    fmt = fmt or detect_format(path)
    if fmt == "jsonl":
        return _read_jsonl(path)
    if fmt == "csv":
        with path.open(newline="", encoding="utf-8") as handle:
            return [dict(row) for row in csv.DictReader(handle)]
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if fmt == "dataset":
        return _read_dataset(path, split)
    raise InputError(f"--format must be one of {list(FORMATS)}, got {fmt!r}")


def _read_jsonl(path: pathlib.Path) -> list[Any]:
    records: list[Any] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                records.append(f"not valid JSON: {err}")
    return records


def _read_dataset(path: pathlib.Path, split: str | None) -> list[Any]:
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except FileNotFoundError as err:
        raise InputError(f"{path}: not a dataset saved with save_to_disk: {err}") from err
    if isinstance(loaded, datasets.DatasetDict):
        if split is None:
            raise InputError(f"{path}: a DatasetDict; choose a split with --split ({sorted(loaded)})")
        if split not in loaded:
            raise InputError(f"{path}: no split {split!r}; splits: {sorted(loaded)}")
        loaded = loaded[split]
    return loaded.to_list()


def _lookup(record: dict, column: str) -> Any:
    """The value at a column name, or at a dotted path into nested records."""
    if column in record:
        return record[column]
    value: Any = record
    for part in column.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def check_columns(records: list[Any], columns: Columns) -> None:
    """Fails when a mapped column appears in no row at all."""
    objects = [r for r in records if isinstance(r, dict)]
    if not objects:
        raise InputError("the input holds no readable rows")
    present = set().union(*(r.keys() for r in objects))
    for name in columns.required():
        if not any(_lookup(r, name) is not None for r in objects):
            raise InputError(
                f"column {name!r} is in no row of the input; columns: {sorted(present)} "
                "(map yours with the --*-column flags)"
            )


def _text(record: dict, column: str, required: bool) -> str | None:
    value = _lookup(record, column)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        if required:
            raise _BadValue(column, "is missing")
        return None
    if not isinstance(value, str):
        raise _BadValue(column, f"must be text, got {type(value).__name__}")
    if not value.strip():
        if required:
            raise _BadValue(column, "must not be empty")
        return None
    return value


def _prompt(record: dict, column: str) -> str | list[dict[str, str]]:
    value = _lookup(record, column)
    if isinstance(value, list):
        for i, message in enumerate(value):
            if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                    and isinstance(message.get("content"), str)):
                raise _BadValue(column, f"message {i} must have text 'role' and 'content'")
        if not value:
            raise _BadValue(column, "must hold at least one chat message")
        return [{"role": m["role"], "content": m["content"]} for m in value]
    return _text(record, column, required=True)


def _score(record: dict, column: str) -> float | None:
    value = _lookup(record, column)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _BadValue(column, f"must be a number, got {value!r}") from None
    if not math.isfinite(number):
        return None
    return number


def _preference(record: dict, column: str) -> str | None:
    value = _lookup(record, column)
    if value is None:
        return None
    word = str(value).strip().lower()
    if word not in _PREFERENCE_WORDS:
        raise _BadValue(
            column,
            f"unknown preference {value!r}: use true/reference/human (humans prefer the reference), "
            "false/completion/model (the completion) or equal/tie/'Equally Good'",
        )
    return _PREFERENCE_WORDS[word]


def _steps(record: dict, column: str) -> list[str] | None:
    value = _lookup(record, column)
    if value is None:
        return None
    if not (isinstance(value, list) and value and all(isinstance(step, str) and step.strip() for step in value)):
        raise _BadValue(column, "must be a list of non-empty texts (the completion's steps)")
    return list(value)


def _completion(record: dict, columns: Columns, steps: list[str] | None) -> str:
    """The completion column's text; with steps and no completion, the steps joined by blank
    lines, as the server joins them."""
    if steps is not None and _lookup(record, columns.completion) is None:
        return "\n\n".join(steps)
    return _text(record, columns.completion, required=True)


def _row(number: int, record: Any, columns: Columns) -> AuditRow:
    if not isinstance(record, dict):
        raise _BadValue(None, record if isinstance(record, str) else "is not a record")
    prompt = _prompt(record, columns.prompt)
    key = f"row-{number}"
    if columns.id:
        raw_id = _lookup(record, columns.id)
        if raw_id is None or str(raw_id).strip() == "":
            raise _BadValue(columns.id, "is missing")
        key = str(raw_id)
    group = json.dumps(prompt, ensure_ascii=False) if not isinstance(prompt, str) else prompt
    if columns.group:
        raw_group = _lookup(record, columns.group)
        if raw_group is None:
            raise _BadValue(columns.group, "is missing")
        group = str(raw_group)
    scores = {name: _score(record, name) for name in columns.human_scores}
    steps = _steps(record, columns.steps) if columns.steps else None
    return AuditRow(
        row=number,
        key=key,
        group=group,
        prompt=prompt,
        completion=_completion(record, columns, steps),
        reference=_text(record, columns.reference, required=False) if columns.reference else None,
        human_scores={name: s for name, s in scores.items() if s is not None},
        preference=_preference(record, columns.preference) if columns.preference else None,
        steps=steps,
    )


def parse_rows(records: list[Any], columns: Columns) -> tuple[list[AuditRow], list[RowError]]:
    """Every good row, and one RowError per bad one (a repeated id counts as bad)."""
    rows: list[AuditRow] = []
    errors: list[RowError] = []
    seen: set[str] = set()
    for number, record in enumerate(records, start=1):
        try:
            row = _row(number, record, columns)
        except _BadValue as bad:
            errors.append(RowError(number, bad.column, str(bad)))
            continue
        if row.key in seen:
            errors.append(RowError(number, columns.id, f"repeats the id {row.key!r} of an earlier row"))
            continue
        seen.add(row.key)
        rows.append(row)
    return rows, errors
