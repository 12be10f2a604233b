"""The one Markdown table writer, for reports, benchmark results and the README's figures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def cell(value: Any) -> str:
    """Floats to three significant digits; everything else as str()."""
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: Sequence[str] = ()) -> str:
    """align: per column "l" or "r" (default left)."""
    rule = ["---:" if (align[i] if i < len(align) else "l") == "r" else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
