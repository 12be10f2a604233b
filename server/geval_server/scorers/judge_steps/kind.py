"""The judge's process reward as a kind (scorers/kind.py): `step-correctness` served on every
server with a judge, its steps reduced by `--judge-step-reduction`."""

from __future__ import annotations

import argparse

from geval_server.scorers.base import STEP_REDUCTIONS
from geval_server.scorers.geval.scorer import GEvalPreparer
from geval_server.scorers.judge_steps.rubric import STEP_CORRECTNESS
from geval_server.scorers.judge_steps.scorer import KIND, JudgeStepsScorer
from geval_server.scorers.kind import ScorerKind, Served, StartContext


class JudgeStepsKind(ScorerKind):
    name = KIND
    needs_judge = True

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group(
            "judge-steps", "The judge's process reward 'step-correctness': a G-Eval step rubric read once per "
            "reasoning step (docs/scorers/process-rewards.md).")
        group.add_argument("--judge-step-reduction", choices=STEP_REDUCTIONS, default="min",
                           help="how the judge's step scores make the reward where a request names none")

    def settings(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
        return args.judge_step_reduction

    async def start(self, reduction: str, context: StartContext) -> Served:
        judge, config = context.judge, context.config
        preparer = GEvalPreparer(judge.engine, judge.tokenization, judge.identity, config.low_confidence_below,
                                 config.defences.policy)
        rubric = await preparer.scorer(STEP_CORRECTNESS)
        engine = judge.engine
        return Served([JudgeStepsScorer(rubric, reduction, judge.model, engine.dtype or "", engine.max_model_len)])
