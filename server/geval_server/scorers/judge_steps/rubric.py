"""The judge's step rubric, `step-correctness` (1-5), and the text it reads for one step.

The judge reads one step at a time: the problem and the steps before it as the input, the
step as the text to rate. Each step's input is the one before it with the previous step
appended, so a completion's prompts share their prefix step after step and vLLM's prefix
cache computes the problem and the earlier steps once (benchmarks/bench_process_reward.py
measures what that saves).
"""

from __future__ import annotations

from collections.abc import Sequence

from geval_server.scorers.geval.expected_score import Scale
from geval_server.scorers.geval.rubrics import Rubric

NAME = "step-correctness"
SOLUTION_SO_FAR = "\n\nThe solution's steps so far:"

STEP_CORRECTNESS = Rubric(
    name=NAME,
    criterion="Step correctness",
    task_introduction=(
        "You will be given a problem, the steps of a solution written so far, and the next step of that solution.\n\n"
        "Your task is to rate the next step on one metric.\n\n"
        "Please make sure you read and understand these instructions carefully."),
    evaluation_criteria=(
        "Step correctness (1-5) - whether the next step is correct: its calculations are right, its reasoning is "
        "valid, and it follows from the problem and the steps before it. A step that makes an error, or builds on "
        "an error made before it, is incorrect; a correct step need not finish the solution."),
    evaluation_steps=(
        "1. Read the problem and the solution's steps so far.\n"
        "2. Read the next step. Check each calculation and each claim it makes against the problem and the earlier "
        "steps.\n"
        "3. Assign a score for step correctness on a scale of 1 to 5, where 1 is certainly wrong and 5 is certainly "
        "correct, based on the Evaluation Criteria."),
    scale=Scale(1, 5),
    source_label="Problem",
    target_label="Next Step",
)


def step_contexts(problem: str, steps: Sequence[str]) -> list[str]:
    """Per step, the input the judge reads before it: the problem, then the steps before it.
    Each is a prefix of the next, so their prompts share a prefix."""
    contexts, text = [], problem
    for k, step in enumerate(steps):
        contexts.append(text)
        text += (SOLUTION_SO_FAR if k == 0 else "") + "\n\n" + step
    return contexts
