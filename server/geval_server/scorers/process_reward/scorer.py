"""The process-reward scorer, served as `process-reward-model`: a trained process reward model
(PRM) read in its own engine beside the judge, one score per reasoning step.

The completion is split into steps (steps.py); the model reads the chat of the prompt and the
steps, each followed by the step tag (chat.py), and a step's score is the model's P(good) at
its tag: the softmax of the two classes' logits there, the second (Qwen2.5-Math-PRM's layout),
computed in float64 from the engine's logits. The reward is the steps' scores reduced (`min`
unless the server or the request says otherwise). Like the reward model it reads no score
slot: a `Score: 10` in a step is text the PRM judges like any other.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from geval_client.pb import reward_pb2

from geval_server.engine.chat_template import ChatRefused
from geval_server.engine.protocol import StepScorerEngine
from geval_server.groupwise.comparer import PointwiseComparer
from geval_server.scorers.base import ItemFailure, JudgeInput, ScorerInfo
from geval_server.scorers.process_reward.chat import StepChatRenderer
from geval_server.scorers.process_reward.checkpoint import GOOD, Checkpoint
from geval_server.scorers.process_reward.steps import Step, reduce_steps, split_steps
from geval_server.scorers.scoring_mode import ScoringMode

KIND = "process_reward"
NAME = "process-reward-model"
SOURCE = "process-reward-model"
POINTWISE = PointwiseComparer()  # in a group each member's steps are scored alone


def p_good(logits: Sequence[float]) -> float:
    """softmax(logits)[GOOD] of a two-class head, without overflow."""
    other = logits[1 - GOOD] - logits[GOOD]
    return 1.0 / (1.0 + math.exp(other)) if other <= 0 else math.exp(-other) / (1.0 + math.exp(-other))


@dataclass(frozen=True)
class ProcessRewardRequest:
    ids: tuple[int, ...]
    tags: tuple[int, ...]
    spans: tuple[tuple[int, int], ...]  # each step's [start, end) in the completion
    reduction: str


@dataclass(frozen=True)
class ProcessRewardScore:
    step_scores: tuple[float, ...]
    spans: tuple[tuple[int, int], ...]
    reduction: str
    reward: float

    def wire(self) -> dict:
        return {"process_reward": {"step_scores": self.step_scores, "step_starts": [s for s, _ in self.spans],
                                   "step_ends": [e for _, e in self.spans], "reduction": self.reduction}}


@dataclass(frozen=True)
class ProcessRewardDetails:
    model: str
    dtype: str
    step_tag: str
    reduction: str
    source: str
    max_model_len: int
    description: str
    criterion: str = ""  # a slot reader's (the judge's step rubric): the judge removes its claims

    def wire(self) -> dict:
        return {"kind": reward_pb2.SCORER_KIND_PROCESS_REWARD, "process_reward": reward_pb2.ProcessRewardInfo(
            model=self.model, dtype=self.dtype, step_tag=self.step_tag, reduction=self.reduction, source=self.source,
            max_model_len=self.max_model_len, description=self.description)}


class ProcessRewardScorer:
    """The PRM's P(good) at each step's tag, reduced to the reward."""

    name: ClassVar[str] = NAME
    kind: ClassVar[str] = KIND
    needs_reference: ClassVar[bool] = False
    reads_score_slot: ClassVar[bool] = False  # a PRM has no score slot
    can_gate: ClassVar[bool] = False
    comparer: ClassVar[PointwiseComparer] = POINTWISE

    def __init__(self, engine: StepScorerEngine, checkpoint: Checkpoint, chat: StepChatRenderer,
                 reduction: str) -> None:
        """reduction: the steps' reduction where a request names none."""
        self.engine = engine
        self.checkpoint = checkpoint
        self.chat = chat
        self.reduction = reduction
        self._description = (
            f"The process reward model {engine.model} ({checkpoint.architecture}, {engine.dtype}) reads the chat "
            f"[user: prompt, assistant: step1 {chat.tag} step2 {chat.tag} ...] through its chat template; a step's "
            f"score is its P(good) at the tag after it (softmax of the two classes, the second). The reward is the "
            f"{reduction} of the step scores unless the request names another (min, mean, last, product).")
        blob = {"model": engine.model, "dtype": engine.dtype, "template": chat.template, "trims": chat.trims,
                "tag": chat.tag, "tag_id": chat.tag_id, "good": GOOD, "reduction": reduction}
        self.content_hash = hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()

    def request(self, item: JudgeInput, where: str) -> ProcessRewardRequest:
        steps: tuple[Step, ...] = split_steps(item.completion, item.steps, where)
        prompt = item.chat if item.chat is not None else (("user", item.prompt),)
        try:
            chat = self.chat.render(prompt, [step.text for step in steps])
        except ChatRefused as error:
            raise ItemFailure("INVALID_ARGUMENT", str(error), f"{where}.chat") from error
        if len(chat.ids) > self.engine.max_model_len:
            raise ItemFailure(
                "INVALID_ARGUMENT",
                f"the process reward model's chat of the prompt and {len(steps)} steps is {len(chat.ids)} tokens, "
                f"over its max_model_len of {self.engine.max_model_len}", f"{where}.completion")
        reduction = (item.steps.reduction if item.steps is not None else None) or self.reduction
        return ProcessRewardRequest(chat.ids, chat.tags, tuple((s.start, s.end) for s in steps), reduction)

    async def step_scores(self, chats: Sequence[ProcessRewardRequest]
                          ) -> dict[tuple[int, ...], list[float] | BaseException]:
        """Every distinct chat's step scores, read in one batch."""
        distinct = list(dict.fromkeys((r.ids, r.tags) for r in chats))
        rows = await self.engine.step_logits([list(ids) for ids, _ in distinct], self.chat.tag_id)
        read: dict[tuple[int, ...], list[float] | BaseException] = {}
        for (ids, tags), found in zip(distinct, rows):
            read[ids] = found if isinstance(found, BaseException) else self._at_tags(ids, tags, found)
        return read

    def _at_tags(self, ids: tuple[int, ...], tags: tuple[int, ...], rows: list[list[float]]
                 ) -> list[float] | BaseException:
        """The rows at our tags: vLLM returns one per occurrence of the tag id, and a tag that is
        no control token may occur in a step's text too."""
        occurrences = [i for i, token in enumerate(ids) if token == self.chat.tag_id]
        if len(rows) != len(occurrences):
            return RuntimeError(f"the engine returned {len(rows)} rows for {len(occurrences)} step tags")
        row_of = {position: row for position, row in zip(occurrences, rows)}
        return [p_good(row_of[position]) for position in tags]

    async def score(self, requests: Sequence[ProcessRewardRequest], mode: ScoringMode
                    ) -> list[ProcessRewardScore | BaseException]:
        """The mode is the judge's to read a slot with; a PRM is read the one way."""
        read = await self.step_scores(requests)
        results: list[ProcessRewardScore | BaseException] = []
        for request in requests:
            scores = read[request.ids]
            if isinstance(scores, BaseException):
                results.append(scores)
                continue
            results.append(ProcessRewardScore(tuple(scores), request.spans, request.reduction,
                                              reduce_steps(scores, request.reduction)))
        return results

    def info(self) -> ScorerInfo:
        details = ProcessRewardDetails(self.engine.model, self.engine.dtype or "", self.chat.tag, self.reduction,
                                       SOURCE, self.engine.max_model_len, self._description)
        return ScorerInfo(name=self.name, kind=self.kind, min_score=0.0, max_score=1.0, higher_is_better=True,
                          uses_reference=False, content_hash=self.content_hash, details=details)
