"""The audit's output folder: items.jsonl (one line per scored row, appended
and flushed as rows are scored) and run.json (what produced them).

Resuming: rows whose key is already in items.jsonl are not scored again. A
last line cut short by an interruption is dropped. Resuming into a folder that
was written with other rubrics, mode or judge is refused, so one report never
mixes two configurations.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

ITEMS_FILE = "items.jsonl"
RUN_FILE = "run.json"


class OutputMismatch(ValueError):
    """The output folder holds results of a different audit configuration."""


class ItemStore:
    def __init__(self, folder: pathlib.Path) -> None:
        self.folder = folder
        self.items_path = folder / ITEMS_FILE
        self.run_path = folder / RUN_FILE

    def open_run(self, run: dict[str, Any]) -> None:
        """Records the run settings, or checks them against the folder's earlier run."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.run_path.exists():
            earlier = json.loads(self.run_path.read_text(encoding="utf-8"))
            differing = sorted(k for k in run if earlier.get(k) != run[k])
            if differing and self.items_path.exists() and self.items_path.stat().st_size:
                raise OutputMismatch(
                    f"{self.folder} holds results of an audit with different {differing} "
                    f"(earlier: { {k: earlier.get(k) for k in differing} }); "
                    "use a new --output folder or delete this one"
                )
        self.run_path.write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    def load(self) -> dict[str, dict[str, Any]]:
        """Records already written, by row key; drops a last line cut short."""
        if not self.items_path.exists():
            return {}
        raw = self.items_path.read_bytes()
        complete = raw[: raw.rfind(b"\n") + 1]
        if len(complete) != len(raw):
            self.items_path.write_bytes(complete)  # an interrupted write left a partial line
        records = {}
        for line in complete.decode("utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                records[record["key"]] = record
        return records

    def appender(self) -> _Appender:
        self.folder.mkdir(parents=True, exist_ok=True)
        return _Appender(self.items_path)


class _Appender:
    def __init__(self, path: pathlib.Path) -> None:
        self._handle = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> _Appender:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
