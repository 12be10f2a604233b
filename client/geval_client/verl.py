"""G-Eval rewards for veRL, in the three forms its reward managers call.

    # geval_reward.py, given to veRL as reward.custom_reward_function.path
    from geval_client.verl import compute_score  # or compute_score_async, compute_score_batch

- compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs): the
  naive and remote reward managers (the latter in a Ray actor: it pickles), and
  prime's process pool (positional arguments).
- compute_score_async(...): the same as a coroutine; the reward loop's naive manager
  awaits it on its event loop, many samples at once.
- compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs):
  the legacy batch reward manager (`batch`); one Score call for the whole batch.

What each sample gives the judge: the input is extra_info[prompt_key] ("prompt" by
default; text or chat messages), the reference is ground_truth when it is text, and
extra_info[rubric_column] ("rubrics" by default: veRL hands a reward each row's fields
in extra_info, not as columns) is the sample's own rubric, a rubric dict or a served
name (or several, weighted: row_rubrics.py), replacing the rubrics for that sample.
Options (server, rubrics, on_error, prompt_key, rubric_column, timeout, mode: "logprobs",
"sampling:N" or "reasoning:MAX_TOKENS") come as keyword arguments, e.g. from
`reward.custom_reward_function.reward_kwargs`, else from the environment
(sample_rewards.py). Other keyword arguments veRL passes (reward_router_address,
reward_model_tokenizer) are ignored.

Every form returns a dict per sample, {"score": float, "label_mass", "failed",
"score_claims_removed"} with the same keys every time, as veRL gathers the extra keys
into per-sample columns. Never None: see sample_rewards.py for what a completion the
server cannot score gets, and what raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .defaults import DEFAULT_TIMEOUT_S
from .failures import OnError
from .requests import Rubrics
from .row_rubrics import row_rubrics
from .sample_rewards import Sample, SampleReward, SampleScorer, reference_text
from .types import Mode

PROMPT_KEY, RUBRIC_COLUMN = "prompt", "rubrics"


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    server: str | None = None,
    rubrics: Rubrics = None,
    on_error: OnError | None = None,
    prompt_key: str = PROMPT_KEY,
    rubric_column: str = RUBRIC_COLUMN,
    timeout: float = DEFAULT_TIMEOUT_S,
    mode: Mode | str | None = None,
    **framework_kwargs: Any,
) -> dict[str, float]:
    scorer = SampleScorer.configure(server, rubrics, on_error, timeout, mode=mode)
    return _reply(scorer.score([_sample(solution_str, ground_truth, extra_info, prompt_key, rubric_column, 0)])[0])


async def compute_score_async(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    server: str | None = None,
    rubrics: Rubrics = None,
    on_error: OnError | None = None,
    prompt_key: str = PROMPT_KEY,
    rubric_column: str = RUBRIC_COLUMN,
    timeout: float = DEFAULT_TIMEOUT_S,
    mode: Mode | str | None = None,
    **framework_kwargs: Any,
) -> dict[str, float]:
    scorer = SampleScorer.configure(server, rubrics, on_error, timeout, mode=mode)
    rewards = await scorer.score_async([_sample(solution_str, ground_truth, extra_info, prompt_key, rubric_column, 0)])
    return _reply(rewards[0])


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None],
    *,
    server: str | None = None,
    rubrics: Rubrics = None,
    on_error: OnError | None = None,
    prompt_key: str = PROMPT_KEY,
    rubric_column: str = RUBRIC_COLUMN,
    timeout: float = DEFAULT_TIMEOUT_S,
    mode: Mode | str | None = None,
    **framework_kwargs: Any,
) -> list[dict[str, float]]:
    if not len(solution_strs) == len(ground_truths) == len(extra_infos):
        raise ValueError(
            f"got {len(solution_strs)} solution_strs, {len(ground_truths)} ground_truths and "
            f"{len(extra_infos)} extra_infos"
        )
    scorer = SampleScorer.configure(server, rubrics, on_error, timeout, mode=mode)
    samples = [
        _sample(s, g, e, prompt_key, rubric_column, i)
        for i, (s, g, e) in enumerate(zip(solution_strs, ground_truths, extra_infos))
    ]
    return [_reply(reward) for reward in scorer.score(samples)]


def _sample(
    solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None, prompt_key: str, rubric_column: str,
    position: int,
) -> Sample:
    """position: the sample's place in the call; errors name its dataset row (extra_info["index"]) where known."""
    extra_info = extra_info or {}
    if prompt_key not in extra_info:
        raise ValueError(
            f"extra_info[{prompt_key!r}] must hold what the judge reads as the input (the prompt); "
            f"extra_info has {sorted(extra_info)}. Add it in the data preprocessing or set prompt_key"
        )
    origin = f"extra_info[{rubric_column!r}] row {extra_info.get('index', position)}"
    return Sample(
        prompt=_prompt(extra_info[prompt_key]),
        completion=solution_str,
        reference=reference_text(ground_truth),
        rubrics=row_rubrics(extra_info.get(rubric_column), origin),
        rubrics_origin=origin,
    )


def _prompt(value: Any) -> str | list[dict[str, str]]:
    """Text, or chat messages (veRL's parquet rows hold them as arrays of dicts)."""
    if isinstance(value, str):
        return value
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in value]


def _reply(reward: SampleReward) -> dict[str, float]:
    return {
        "score": reward.reward,
        "label_mass": reward.label_mass,
        "failed": float(reward.failed),
        "score_claims_removed": float(reward.score_claims_removed),
    }
