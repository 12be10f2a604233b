"""G-Eval rewards for AReaL: the reward function its RLVR workflow calls.

AReaL's RLVRWorkflow(reward_fn=...) takes a function or its import path and calls it through
AsyncRewardWrapper as reward_fn(prompt, completions, prompt_ids, completion_ids, **data): one
sample a call, `completions` the reply decoded with its special tokens, `data` the dataset
row's fields. The wrapper runs it in a process pool (ProcessPoolExecutor), so:

- The reward pickles: reward_fn (the import path "geval_client.trainers.areal.reward_fn",
  configured from the environment: GEVAL_REWARD_SERVER, GEVAL_REWARD_RUBRICS, ...) is a
  module function, and make_reward_fn(...) returns an AReaLReward, a few plain values. Each
  worker process opens its own gRPC channel on its first call and keeps it (scoring.py).
- It answers within the wrapper's timeout_seconds (15 s, which RLVRWorkflow does not let one
  change): past it AReaL retries and, on the last try, trains on 0. So a call has a deadline
  of AREAL_TIMEOUT_S and is not called again on its own (wait_for_server_s 0): a server that
  is down or too slow raises RewardServerError before the wrapper's timeout, AReaL logs it,
  calls again (its max_retries) and then raises it out of the episode, whose rollout AReaL's
  WorkflowExecutor then logs and rejects; AReaL's retries are the wait for the server.
- Its errors come back whole through the pool (they pickle): a failure the completion did
  not cause (no reference where the rubric needs one, a judge error) raises ItemNotScored,
  never a 0; a completion that fails for its own reason (empty, over the judge's limits)
  gets on_error ("min", 0.0, or a float).

What the judge reads: data[prompt_key] ("messages", RLVRWorkflow's default prompt field) as
the input, text or chat; without it, `prompt`, the chat template's text. The completion
without its end-of-turn markers; data[reference_key] ("answer"), where it is text, as the
reference; data[rubric_column] ("rubrics"), where present, as the row's own rubric
(shared/row_rubrics.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..requests import Rubrics
from ..types import ScoringMode
from .shared.failures import OnError
from .shared.row_rubrics import row_rubrics
from .shared.sample_rewards import SampleScorer, reference_text
from .shared.scoring import Sample
from .shared.trainer_text import judge_prompt, without_end_markers

# AsyncRewardWrapper's timeout_seconds is 15 s; the process pool's dispatch and a worker's
# first connection take the rest.
AREAL_TIMEOUT_S = 12.0
PROMPT_KEY, REFERENCE_KEY, RUBRIC_COLUMN = "messages", "answer", "rubrics"


@dataclass(frozen=True)
class AReaLReward:
    """reward_fn(prompt, completions, prompt_ids, completion_ids, **data) -> the reward, a float."""

    scorer: SampleScorer
    prompt_key: str = PROMPT_KEY
    reference_key: str = REFERENCE_KEY
    rubric_column: str = RUBRIC_COLUMN

    def __call__(self, prompt: str, completions: str, prompt_ids: Any = None, completion_ids: Any = None,
                 **data: Any) -> float:
        return self.scorer.rewards([self.sample(prompt, completions, data)])[0].reward

    def sample(self, prompt: str, completion: str, data: Mapping[str, Any]) -> Sample:
        origin = f"data[{self.rubric_column!r}]"
        return Sample(
            prompt=judge_prompt(data.get(self.prompt_key, prompt)),
            completion=without_end_markers(completion),
            reference=reference_text(data.get(self.reference_key)),
            rubrics=row_rubrics(data.get(self.rubric_column), origin),
            rubrics_origin=origin,
        )


def make_reward_fn(
    server: str | None = None,
    rubrics: Rubrics = None,
    on_error: OnError | None = None,
    timeout: float = AREAL_TIMEOUT_S,
    mode: ScoringMode | str | None = None,
    prompt_key: str = PROMPT_KEY,
    reference_key: str = REFERENCE_KEY,
    rubric_column: str = RUBRIC_COLUMN,
    gate: str | None = None,
    gate_reward: float | None = None,
    steps: Mapping[str, str] | None = None,
) -> AReaLReward:
    """A reward_fn for RLVRWorkflow (or any workflow that wraps it in AsyncRewardWrapper).

    Args:
        server: "host:port" or a fleet; None: $GEVAL_REWARD_SERVER, else localhost:50051.
        rubrics: a name, a list or {name: weight}; None: $GEVAL_REWARD_RUBRICS, else the
            server's default (the environment is read in shared/sample_rewards.py).
        on_error: "min" or a float, for a completion that caused its own failure; None:
            $GEVAL_REWARD_ON_ERROR, else "min".
        timeout: one call's deadline; keep it under the wrapper's timeout_seconds (15 s).
        mode: how G-Eval rubrics read the slot; None: $GEVAL_REWARD_MODE, else Logprobs().
        prompt_key: the row's field read as the input (see the module docstring).
        reference_key: the row's field read as the reference.
        rubric_column: the row's field holding its own rubric.
        gate: a rule checked first ("math-equal"); a completion that fails it gets gate_reward
            (default 0.0) and the judge does not read it. None: $GEVAL_REWARD_GATE, else none.
        steps: how process rewards split and reduce, {"delimiter": ..., "reduction": ...}; a key
            left out: $GEVAL_REWARD_STEP_DELIMITER, $GEVAL_REWARD_STEP_REDUCTION, else the server's.

    Example:
        workflow = RLVRWorkflow(reward_fn=make_reward_fn("judge:50051", "summeval-coherence"), ...)
        make_reward_fn("judge:50051")("", "A library will be built.<|im_end|>", [], [],
                                      messages=[{"role": "user", "content": "Summarize: ..."}])  # -> 0.71
    """
    scorer = SampleScorer.configure(server, rubrics, on_error, timeout, mode=mode, wait_for_server_s=0, gate=gate,
                                    gate_reward=gate_reward, steps=steps)
    return AReaLReward(scorer, prompt_key, reference_key, rubric_column)


def reward_fn(prompt: str, completions: str, prompt_ids: Any = None, completion_ids: Any = None, **data: Any) -> float:
    """The reward configured from the environment, for
    RLVRWorkflow(reward_fn="geval_client.trainers.areal.reward_fn")."""
    return make_reward_fn()(prompt, completions, prompt_ids, completion_ids, **data)
