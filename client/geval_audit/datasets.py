"""The human-annotated evaluation sets in ../shared/data (see its README), read one
way for every benchmark, example and check: each rated text with the input it
answers, its group and its human scores.

The folder is found beside this repository's checkout, or at $GEVAL_DATA_DIR.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

SUMMEVAL_DIMENSIONS = ("coherence", "consistency", "fluency", "relevance")
TOPICAL_CHAT_DIMENSIONS = ("naturalness", "coherence", "engagingness", "groundedness")


def data_dir() -> pathlib.Path:
    configured = os.environ.get("GEVAL_DATA_DIR")
    if configured:
        return pathlib.Path(configured)
    return pathlib.Path(__file__).resolve().parents[3] / "shared" / "data"


@dataclass(frozen=True)
class Rated:
    """One text rated by people."""

    group: str  # what ties the texts written for one input (SummEval: the document)
    source: str  # the input the judge reads (an article, a dialogue with its fact)
    text: str  # the rated text (a summary, a response)
    system: str
    scores: dict[str, float] = field(default_factory=dict)
    reference: str | None = None  # a human-written reference, where the set has one


def _jsonl(path: pathlib.Path) -> Iterator[dict]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the evaluation sets live in ../shared/data "
                                "beside the checkout (or set GEVAL_DATA_DIR)")
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def summeval() -> list[Rated]:
    """1,600 summaries: 100 CNN/DailyMail articles x 16 systems, 4 expert-rated dimensions."""
    return [
        Rated(group=r["doc_id"], source=r["source"], text=r["system_output"], system=r["system_id"],
              scores={d: r["scores"][d] for d in SUMMEVAL_DIMENSIONS}, reference=r["reference"])
        for r in _jsonl(data_dir() / "summeval" / "summeval.jsonl")
    ]


def topical_chat() -> list[Rated]:
    """360 responses: 60 dialogues x 6; the judge reads the dialogue and its knowledge fact."""
    return [
        Rated(group=r["source"], source=f"{r['source'].strip()}\n\nCorresponding Fact:\n\n{r['context'].strip()}",
              text=r["system_output"], system=r["system_id"],
              scores={d: r["scores"][d] for d in TOPICAL_CHAT_DIMENSIONS})
        for r in _jsonl(data_dir() / "topical_chat" / "topical_chat.jsonl")
    ]


def qags(subset: str) -> list[Rated]:
    """QAGS factual consistency, subset "cnndm" (235 summaries) or "xsum" (239)."""
    return [
        Rated(group=str(r["doc_id"]), source=r["source"], text=r["system_output"], system=str(r.get("system_id", "")),
              scores={"consistency": r["scores"]["consistency"]})
        for r in _jsonl(data_dir() / "qags" / f"qags_{subset}.jsonl")
    ]


def human_vs_llm_pairs() -> list[dict]:
    """599 pairwise judgments of a writer's vs text-davinci-002's summary, fields as in the file."""
    return list(_jsonl(data_dir() / "human_vs_llm_summaries" / "pairwise_judgments.jsonl"))


def groups(records: Iterable[Rated]) -> dict[str, list[Rated]]:
    """Records by group, groups in first-seen order."""
    found: dict[str, list[Rated]] = {}
    for record in records:
        found.setdefault(record.group, []).append(record)
    return found


def first_groups(records: Iterable[Rated], limit: int | None) -> list[Rated]:
    """The records of the first `limit` groups (all when None), in input order."""
    return [r for texts in list(groups(records).values())[:limit] for r in texts]
