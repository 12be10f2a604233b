"""The reward-model scorer, served as `reward-model`: a trained sequence classifier (a
Bradley-Terry reward model) read in its own engine beside the judge.

Its raw score r(x, y) is the chosen head's logit for the chat of prompt x and completion y
(chat.py), read exactly. A Bradley-Terry model's scores are defined up to a constant, so the
raw number alone is no reward in [0, 1]; two forms make one:
- "reference", where the item carries a reference: sigmoid(r(x, y) - r(x, ref)), the
  model's probability that the completion is preferred to the reference, both read in the
  same batch;
- "calibrated", without one: sigmoid((r(x, y) - center) / scale), with constants the user
  gives (`--reward-model-center`, `--reward-model-scale`) or fits on their own completions
  (`geval-reward fit-reward-model`: the median and the quartiles' spread, so the median
  completion gets 0.5 and the quartiles 0.25 and 0.75).
Within a group (ScoreGroups) each completion's reward is its mean sigmoid(r_i - r_j) over
its peers (groups.py).

It reads no score slot: a claim such as `Score: 10` in a completion is text the classifier
reads like any other, so the slot defences (claim removal, the bounded read) do not run for it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from geval_client.pb import reward_pb2

from geval_server.engine.chat_template import ChatRefused
from geval_server.engine.protocol import ClassifierEngine
from geval_server.scorers.base import ItemFailure, JudgeInput, ScorerInfo
from geval_server.scorers.reward_model.chat import ChatRenderer
from geval_server.scorers.reward_model.checkpoint import Checkpoint
from geval_server.scorers.scoring_mode import ScoringMode

if TYPE_CHECKING:
    from geval_server.groupwise.comparer import Comparer

KIND = "reward_model"
NAME = "reward-model"
REFERENCE, CALIBRATED = "reference", "calibrated"


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


@dataclass(frozen=True)
class Calibration:
    """The calibrated form's constants: reward = sigmoid((raw - center) / scale)."""

    center: float = 0.0
    scale: float = 1.0

    def reward(self, raw: float) -> float:
        return sigmoid((raw - self.center) / self.scale)


@dataclass(frozen=True)
class RewardModelRequest:
    chat: tuple[int, ...]  # the (prompt, completion) chat's token ids
    reference: tuple[int, ...] | None  # the (prompt, reference) chat's, for the reference form


@dataclass(frozen=True)
class RewardModelScore:
    raw_score: float
    reference_raw_score: float | None
    heads: dict[str, float]
    reward: float

    @property
    def form(self) -> str:
        return CALIBRATED if self.reference_raw_score is None else REFERENCE

    def wire(self) -> dict:
        return {"reward_model": {"raw_score": self.raw_score, "reference_raw_score": self.reference_raw_score,
                                 "heads": self.heads, "form": self.form}}


@dataclass(frozen=True)
class RewardModelDetails:
    model: str
    dtype: str
    head: str
    heads: tuple[str, ...]
    calibration: Calibration
    max_model_len: int
    description: str

    def wire(self) -> dict:
        return {"kind": reward_pb2.SCORER_KIND_REWARD_MODEL, "reward_model": reward_pb2.RewardModelInfo(
            model=self.model, dtype=self.dtype, head=self.head, heads=self.heads, center=self.calibration.center,
            scale=self.calibration.scale, reference_form=True, max_model_len=self.max_model_len,
            description=self.description)}


class RewardModelScorer:
    """The classifier's chosen head as a reward; every head reported."""

    name: ClassVar[str] = NAME
    kind: ClassVar[str] = KIND
    needs_reference: ClassVar[bool] = False  # used where given
    reads_score_slot: ClassVar[bool] = False  # a classifier has no score slot
    can_gate: ClassVar[bool] = False

    def __init__(self, engine: ClassifierEngine, checkpoint: Checkpoint, chat: ChatRenderer,
                 calibration: Calibration = Calibration(), comparer: Comparer | None = None) -> None:
        """comparer: how groups compare on it (groups.py), given by the kind that serves it."""
        self.engine = engine
        self.checkpoint = checkpoint
        self.chat = chat
        self.calibration = calibration
        self.comparer = comparer
        self._description = (
            f"The output {checkpoint.heads[checkpoint.head]!r} of the reward model {engine.model} "
            f"({checkpoint.architecture}, {engine.dtype}) for the chat [user: prompt, assistant: completion] "
            "through its chat template, read as a logit. Reward with a reference: sigmoid(raw - reference's raw) "
            f"(Bradley-Terry); without: sigmoid((raw - {calibration.center}) / {calibration.scale}).")
        blob = {"model": engine.model, "dtype": engine.dtype, "template": chat.template, "trims": chat.trims,
                "head": checkpoint.head, "heads": checkpoint.heads, "center": calibration.center,
                "scale": calibration.scale, "forms": [REFERENCE, CALIBRATED]}
        self.content_hash = hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()

    def _ids(self, prompt: JudgeInput, answer: str, field: str) -> tuple[int, ...]:
        turns = prompt.chat if prompt.chat is not None else (("user", prompt.prompt),)
        try:
            ids = self.chat.ids([*turns, ("assistant", answer)])
        except ChatRefused as error:
            raise ItemFailure("INVALID_ARGUMENT", str(error), field.rpartition(".")[0] + ".chat") from error
        if len(ids) > self.engine.max_model_len:
            raise ItemFailure(
                "INVALID_ARGUMENT",
                f"the reward model's chat of the prompt and {field.rpartition('.')[2]} is {len(ids)} tokens, over "
                f"its max_model_len of {self.engine.max_model_len}", field)
        return tuple(ids)

    def request(self, item: JudgeInput, where: str) -> RewardModelRequest:
        reference = None
        if item.reference is not None and item.reference.strip():
            reference = self._ids(item, item.reference, f"{where}.reference")
        return RewardModelRequest(self._ids(item, item.completion, f"{where}.completion"), reference)

    async def raw_scores(self, chats: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], list[float] | BaseException]:
        """Every distinct chat's heads, read in one batch."""
        distinct = list(dict.fromkeys(chats))
        return dict(zip(distinct, await self.engine.classify([list(ids) for ids in distinct])))

    async def score(self, requests: Sequence[RewardModelRequest], mode: ScoringMode
                    ) -> list[RewardModelScore | BaseException]:
        """The mode is the judge's to read a slot with; a classifier is read the one way."""
        read = await self.raw_scores([ids for r in requests for ids in (r.chat, r.reference) if ids is not None])
        head = self.checkpoint.head
        results: list[RewardModelScore | BaseException] = []
        for request in requests:
            own = read[request.chat]
            other = read[request.reference] if request.reference is not None else None
            failed = next((r for r in (own, other) if isinstance(r, BaseException)), None)
            if failed is not None:
                results.append(failed)
                continue
            heads = dict(zip(self.checkpoint.heads, own))
            if other is None:
                results.append(RewardModelScore(own[head], None, heads, self.calibration.reward(own[head])))
            else:
                results.append(RewardModelScore(own[head], other[head], heads, sigmoid(own[head] - other[head])))
        return results

    def info(self) -> ScorerInfo:
        checkpoint = self.checkpoint
        details = RewardModelDetails(self.engine.model, self.engine.dtype or "", checkpoint.heads[checkpoint.head],
                                     checkpoint.heads, self.calibration, self.engine.max_model_len, self._description)
        return ScorerInfo(name=self.name, kind=self.kind, min_score=-math.inf, max_score=math.inf,
                          higher_is_better=True, uses_reference=False, content_hash=self.content_hash,
                          details=details)
