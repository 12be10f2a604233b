"""Each row's own rubric, read from the data: a TRL dataset column (`rubric_column`),
a key of OpenRLHF's label object or of veRL's extra_info. It replaces the reward's
rubrics for that row, as an item's own rubrics replace a request's: criteria written
per prompt ("rubrics as rewards"). A row whose value is None is scored with the
reward's rubrics.

A value is the name of a served rubric or a rubric dict with a rubric file's keys
(`scale` as {"min", "max"}), or several as `rubrics=` takes them. Arrow-backed data
(Hugging Face datasets, parquet) gives every row of a struct column every key, None
where the row had none: such keys count as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...pb import reward_pb2
from ...requests import rubric_selection
from ...types import ItemError


def column_row(column: str, row: int) -> str:
    """How errors name where a row's rubric came from."""
    return f"column {column!r} row {row}"


def row_rubrics(value: Any, origin: str) -> list[reward_pb2.RubricSelection]:
    """The row's own rubrics ([] for None); a value that is no rubric raises ValueError naming origin."""
    if value is None:
        return []
    if isinstance(value, bytes) or not isinstance(value, str | Mapping | list | tuple):
        raise ValueError(
            f"{origin}: a rubric is a rubric dict or the name of a served rubric, got {type(value).__name__}"
        )
    try:
        return rubric_selection(_without_nulls(value))
    except (ValueError, TypeError, AttributeError) as error:
        raise ValueError(f"{origin}: {error}") from None


def rubric_error(error: ItemError, origin: str | None) -> str:
    """The server's message for a failed item, naming the row's origin when its own rubric failed."""
    if origin is not None and ".rubrics[" in error.field:
        return f"{origin}: {error.message}"
    return error.message


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list | tuple):
        return type(value)(_without_nulls(item) for item in value)
    return value
