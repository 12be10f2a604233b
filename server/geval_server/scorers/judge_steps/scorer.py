"""The judge's process reward, served as `step-correctness`: a G-Eval step rubric (rubric.py)
read once per reasoning step at the judge's score slot (scorers/geval/slot.py's exact label
read, through GEvalScorer), each step's score its reward in [0, 1], the steps reduced as a
process reward model's are (scorers/process_reward/steps.py), so a team with no PRM gets
the same `.step_scores` from its judge.

It reads a score slot, so the judge's defences run on the completion before it is split
(score claims removed, the bounded second read): the step spans are offsets in the text the
judge read, which differs from the completion only where a claim was removed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from geval_server.groupwise.comparer import PointwiseComparer
from geval_server.scorers.base import JudgeInput, ScorerInfo
from geval_server.scorers.geval.prompts import PromptParts
from geval_server.scorers.geval.scorer import GEvalScorer
from geval_server.scorers.judge_steps.rubric import step_contexts
from geval_server.scorers.process_reward.scorer import ProcessRewardDetails, ProcessRewardScore
from geval_server.scorers.process_reward.steps import reduce_steps, split_steps
from geval_server.scorers.scoring_mode import ScoringMode

KIND = "judge_steps"
SOURCE = "judge"
POINTWISE = PointwiseComparer()


@dataclass(frozen=True)
class JudgeStepsRequest:
    prompts: tuple[PromptParts, ...]  # one judge prompt per step
    spans: tuple[tuple[int, int], ...]
    reduction: str


class JudgeStepsScorer:
    """A G-Eval step rubric read per step, reduced to the reward."""

    kind: ClassVar[str] = KIND
    needs_reference: ClassVar[bool] = False
    reads_score_slot: ClassVar[bool] = True  # the judge reads each step at its score slot
    can_gate: ClassVar[bool] = False
    comparer: ClassVar[PointwiseComparer] = POINTWISE

    def __init__(self, rubric: GEvalScorer, reduction: str, model: str, dtype: str, max_model_len: int) -> None:
        self.rubric = rubric
        self.name = rubric.name
        self.reduction = reduction
        self._details = ProcessRewardDetails(
            model, dtype, "", reduction, SOURCE, max_model_len,
            f"The judge reads the G-Eval rubric {rubric.name!r} once per reasoning step, the problem and the steps "
            "before it as its input and the step as the text to rate; a step's score is the rubric's reward for it. "
            f"The reward is the {reduction} of the step scores unless the request names another (min, mean, last, "
            "product).", rubric.prepared.rubric.criterion)
        self.content_hash = hashlib.sha256(f"{rubric.content_hash}:steps:{reduction}".encode()).hexdigest()

    def request(self, item: JudgeInput, where: str) -> JudgeStepsRequest:
        steps = split_steps(item.completion, item.steps, where)
        texts = [step.text for step in steps]
        prompts = tuple(self.rubric.request(JudgeInput(context, step), where)
                        for context, step in zip(step_contexts(item.prompt, texts), texts))
        reduction = (item.steps.reduction if item.steps is not None else None) or self.reduction
        return JudgeStepsRequest(prompts, tuple((s.start, s.end) for s in steps), reduction)

    async def score(self, requests: Sequence[JudgeStepsRequest], mode: ScoringMode
                    ) -> list[ProcessRewardScore | BaseException]:
        """Every step of every request read in one batch: the rubric's scorer submits prompts
        that share their input side by side, so the prefix cache computes it once."""
        distinct = list(dict.fromkeys(p for request in requests for p in request.prompts))
        read = dict(zip(distinct, await self.rubric.score(distinct, mode)))
        results: list[ProcessRewardScore | BaseException] = []
        for request in requests:
            scores = [read[p] for p in request.prompts]
            failed = next((s for s in scores if isinstance(s, BaseException)), None)
            if failed is not None:
                results.append(failed)
                continue
            step_scores = tuple(s.reward for s in scores)
            results.append(ProcessRewardScore(step_scores, request.spans, request.reduction,
                                              reduce_steps(step_scores, request.reduction)))
        return results

    def info(self) -> ScorerInfo:
        return ScorerInfo(name=self.name, kind=self.kind, min_score=0.0, max_score=1.0, higher_is_better=True,
                          uses_reference=False, content_hash=self.content_hash, details=self._details)
