"""Auto chain-of-thought (G-Eval): a rubric without evaluation steps gets them
written once by the judge from its criteria, greedily, then frozen.

Steps are cached on disk keyed by the judge and the rubric's text, so a
restart serves the very same prompts.
"""

from __future__ import annotations

import hashlib
import json
import logging

from geval_server.cache import cache_dir, write_text
from geval_server.engine.protocol import JudgeEngine
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.geval.rubrics import Rubric

log = logging.getLogger(__name__)

MAX_STEP_TOKENS = 256


def _cache_key(judge_model: str, rubric: Rubric) -> str:
    text = [judge_model, rubric.task_introduction, rubric.evaluation_criteria, rubric.criterion]
    return hashlib.sha256(json.dumps(text).encode()).hexdigest()[:32]


def steps_prompt(tokenization: Tokenization, rubric: Rubric) -> list[int]:
    """The paper's recipe: introduction and criteria, then `Evaluation Steps:` to continue."""
    user = (
        f"{rubric.task_introduction}\n\nEvaluation Criteria:\n\n{rubric.evaluation_criteria}\n\n"
        "Write the evaluation steps a careful rater follows for this task, as a numbered list."
    )
    return tokenization.begin(tokenization.turn_open + user + tokenization.turn_close + "Evaluation Steps:\n\n1.")


def tidy_steps(generated: str) -> str:
    """Keeps the numbered list the judge wrote; drops an unfinished last line."""
    text = "1." + generated
    lines = [line.rstrip() for line in text.strip().splitlines()]
    if len(lines) > 1 and not lines[-1].endswith((".", ":", "!", "?")):
        lines = lines[:-1]
    return "\n".join(line for line in lines if line.strip())


async def ensure_steps(
    engine: JudgeEngine, tokenization: Tokenization, judge_model: str, rubric: Rubric
) -> Rubric:
    if rubric.evaluation_steps is not None:
        return rubric
    path = cache_dir() / "steps" / f"{_cache_key(judge_model, rubric)}.txt"
    if path.exists():
        steps = path.read_text(encoding="utf-8")
    else:
        generated = await engine.generate_greedy(steps_prompt(tokenization, rubric), MAX_STEP_TOKENS)
        steps = tidy_steps(generated)
        write_text(path, steps)  # atomic, and safe beside another server writing the same steps
        log.info("generated evaluation steps for rubric %s:\n%s", rubric.name, steps)
    return rubric.with_generated_steps(steps)
