"""G-Eval rewards for veRL, one form per way its reward managers call a reward.

veRL loads a form by path and name (`reward.custom_reward_function.path` and `.name`;
`custom_reward_function.*` before 0.7); `pkg://geval_client.verl` needs no file:

- compute_score(data_source, solution_str, ground_truth, extra_info, **options): the
  naive, dapo and remote managers (the remote one in a Ray actor: it pickles).
- compute_score_async(...): the same as a coroutine; the reward loop's naive, dapo and
  gdpo managers await it on their event loop, many samples at once.
- compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **options):
  the legacy `batch` manager; one Score call for the whole batch.
- compute_score_batch_groupwise(...): the same manager, judging each sample against the
  other samples of its prompt and reference (ScoreGroups), found wherever they stand:
  trainer.balance_batch reorders the batch before the reward sees it.
- compute_score_prime(...): the legacy `prime` manager, which reads a number (or
  float(result[0])) and turns any Exception into 0.0: it returns the reward as a float.
- compute_score_rate_limited(...): the `rate_limited` manager, which turns any Exception
  into 0.0 with other keys than a scored sample's.

A failure the completion did not cause (a missing reference, a judge error, the server
unreachable) must not become a number: the first three forms raise it, and veRL's naive,
dapo, gdpo, remote and batch managers let it stop the step. prime and rate_limited catch
every Exception, so their forms log the cause at error level and raise ScoringAborted, a
BaseException their `except Exception` lets through (shared/aborts.py: in the form Ray reports).
compute_score's dict under prime raises it too, naming compute_score_prime, rather than
read as 0, and so does compute_score_async under prime, whose coroutine its process pool
cannot send back.

What each sample gives the judge: the input is extra_info[prompt_key] ("prompt" by
default; text or chat messages), the reference is ground_truth when it is text, and
extra_info[rubric_column] ("rubrics" by default: veRL hands a reward each row's fields
in extra_info, not as columns) is the sample's own rubric, a rubric dict or a served
name (or several, weighted: shared/row_rubrics.py), replacing the rubrics for that sample.
Options (server, rubrics, on_error, prompt_key, rubric_column, timeout, mode: "logprobs",
"sampling:N" or "reasoning:MAX_TOKENS", rubric_keys, gate, gate_reward, steps: a process
reward's {"delimiter": ..., "reduction": ...}) come as keyword arguments, from
`reward_kwargs` in veRL's config, else from the environment (shared/sample_rewards.py); the
reward loop's own reward_router_address and reward_model_tokenizer are ignored, any
other name is an error.

StepRewardManager is a reward manager, not a form: veRL's legacy managers put a form's number
on a response's last token, and it puts a process reward's step scores on their steps' last
tokens instead (shared/step_tokens.py). veRL 0.7.0 loads it with
`reward_model.use_reward_loop=False reward_manager.source=importlib
reward_manager.name=StepRewardManager reward_manager.module.path=pkg://geval_client.verl`, its
options from `reward_model.reward_kwargs`; from the reward loop on (0.9.1) a manager's reward
is one number per sample (docs/trainers/verl.md).

The dict forms return the same keys for every sample, as veRL gathers them into
per-sample columns from the first sample's keys: {"score", "label_mass", "failed",
"score_claims_removed", "bound_lowered", "bound_gap"} (diagnostics.sample_logs), and with
rubric_keys=True one "score/<rubric>" per configured rubric, for GDPO's
`algorithm.gdpo_reward_keys`.
"""

from __future__ import annotations

import logging
import multiprocessing
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Any

from ..defaults import DEFAULT_TIMEOUT_S
from ..requests import Rubrics, rubric_selection
from ..types import ScoringMode
from .shared.aborts import ScoringAborted, aborted
from .shared.diagnostics import sample_logs
from .shared.failures import OnError
from .shared.groups import group_key, groups_by_key, nobody_to_compare
from .shared.row_rubrics import row_rubrics
from .shared.sample_rewards import SampleScorer, reference_text
from .shared.scoring import Groupwise, Sample, SampleReward
from .shared.step_tokens import token_rewards

log = logging.getLogger(__name__)

PROMPT_KEY, RUBRIC_COLUMN = "prompt", "rubrics"
# What veRL's reward loop passes on its own when a reward model runs; not options of ours.
VERL_KWARGS = frozenset({"reward_router_address", "reward_model_tokenizer"})
# rate_limited gives up on a sample after `reward.timeout` (300 s by default) and sets 0.0,
# with a warning: its form answers (or fails) well before, deadline and waiting included.
RATE_LIMITED_TIMEOUT_S, RATE_LIMITED_WAIT_S = 200.0, 60.0


@dataclass(frozen=True)
class _Options:
    scorer: SampleScorer
    prompt_key: str
    rubric_column: str
    rubric_keys: tuple[str, ...]  # the "score/<rubric>" keys' rubrics; () when not asked for


def _options(
    server: str | None = None,
    rubrics: Rubrics = None,
    on_error: OnError | None = None,
    prompt_key: str = PROMPT_KEY,
    rubric_column: str = RUBRIC_COLUMN,
    timeout: float = DEFAULT_TIMEOUT_S,
    mode: ScoringMode | str | None = None,
    rubric_keys: bool = False,
    wait_for_server_s: float | None = None,
    gate: str | None = None,
    gate_reward: float | None = None,
    steps: Mapping[str, str] | None = None,
    **framework_kwargs: Any,
) -> _Options:
    unknown = set(framework_kwargs) - VERL_KWARGS
    if unknown:
        raise TypeError(
            f"geval_client.verl: unknown option(s) {sorted(unknown)} (from reward_kwargs?); options are server, "
            "rubrics, on_error, prompt_key, rubric_column, timeout, mode, rubric_keys, gate, gate_reward, steps (and "
            "schedule, aggregation "
            "for compute_score_batch_groupwise)"
        )
    scorer = SampleScorer.configure(server, rubrics, on_error, timeout, mode=mode, wait_for_server_s=wait_for_server_s,
                                    gate=gate, gate_reward=gate_reward, steps=steps)
    return _Options(scorer, prompt_key, rubric_column, _rubric_names(scorer.rubrics) if rubric_keys else ())


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None,
    **options: Any,
) -> dict[str, float]:
    """One sample's reward as a dict ("score" and the fixed extra keys).

    Example: compute_score("summeval", "A library will be built.", "The reference.",
    {"prompt": "Summarize: ..."}, server="judge:50051", rubrics="summeval-coherence")
    -> {"score": 0.71, "label_mass": 0.93, "failed": 0.0, "score_claims_removed": 0.0}"""
    opts = _options(**options)
    sample = _sample(solution_str, ground_truth, extra_info, opts, 0)
    return _reply(opts.scorer.rewards([sample])[0], opts)


async def compute_score_async(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None,
    **options: Any,
) -> dict[str, float]:
    """compute_score as a coroutine, for the reward loop's managers."""
    opts = _options(**options)
    sample = _sample(solution_str, ground_truth, extra_info, opts, 0)
    return _reply((await opts.scorer.rewards_async([sample]))[0], opts)


def compute_score_batch(
    data_sources: Sequence[str], solution_strs: Sequence[str], ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None], **options: Any,
) -> list[dict[str, float]]:
    """The legacy batch manager's form: one dict per sample, one Score call for all."""
    opts = _options(**options)
    samples = _batch_samples(solution_strs, ground_truths, extra_infos, opts)
    return [_reply(reward, opts) for reward in opts.scorer.rewards(samples)]


def compute_score_batch_groupwise(
    data_sources: Sequence[str], solution_strs: Sequence[str], ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None], schedule: str | None = None,
    aggregation: str = "mean_win_probability", **options: Any,
) -> list[dict[str, float]]:
    """The legacy batch manager's groupwise form: one ScoreGroups call for the batch, each sample
    judged against the samples with the same extra_info[prompt_key] and ground_truth; one dict per
    sample, in batch order, with compute_score_batch's keys. schedule, aggregation: as ScoreGroups
    takes them (scoring.Groupwise). A sample alone with its prompt gets 0.5, the server's
    reward for a completion compared with nobody.

    Example: compute_score_batch_groupwise(["d"] * 4, ["A.", "B.", "C.", "D."], ["R1", "R2", "R1", "R2"],
    [{"prompt": "P1"}, {"prompt": "P2"}, {"prompt": "P1"}, {"prompt": "P2"}], server="judge:50051")
    -> samples 0 and 2 compared, 1 and 3 compared: [{"score": 0.8, ...}, {"score": 0.4, ...}, ...]"""
    groupwise = Groupwise(schedule, aggregation)
    opts = _options(**options)
    samples = _batch_samples(solution_strs, ground_truths, extra_infos, opts)
    groups = groups_by_key([group_key(sample.prompt, sample.reference) for sample in samples])
    if nobody_to_compare(groups, schedule):
        # veRL validates with actor_rollout_ref.rollout.val_kwargs.n=1 by default: a warning, not a
        # stop, so that a run with validation on still starts.
        log.warning(
            "geval_client.verl.compute_score_batch_groupwise: none of the %d samples shares its prompt and "
            "reference with another, so each gets 0.5 (compared with nobody); groupwise rewards need "
            "actor_rollout_ref.rollout.n >= 2 (validation: rollout.val_kwargs.n), or schedule='anchor'",
            len(samples),
        )
    return [_reply(reward, opts) for reward in opts.scorer.groupwise_rewards(samples, groups, groupwise)]


def compute_score_prime(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None,
    **options: Any,
) -> float:
    """The legacy prime manager's form: the reward as a float; any failure raises ScoringAborted.
    prime runs it in a pool of processes, each with its own connection to the server."""
    try:
        opts = _options(**options)
        return opts.scorer.rewards([_sample(solution_str, ground_truth, extra_info, opts, 0)])[0].reward
    except Exception as error:
        raise _aborted("compute_score_prime", error) from error


async def compute_score_rate_limited(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None,
    **options: Any,
) -> dict[str, float]:
    """The rate_limited manager's form: compute_score_async's dict, any failure raises
    ScoringAborted; by default it answers within 260 s, under the manager's 300 s timeout."""
    options.setdefault("timeout", RATE_LIMITED_TIMEOUT_S)
    options.setdefault("wait_for_server_s", RATE_LIMITED_WAIT_S)
    try:
        return await compute_score_async(data_source, solution_str, ground_truth, extra_info, **options)
    except Exception as error:
        raise _aborted("compute_score_rate_limited", error) from error


def _aborted(form: str, error: Exception) -> ScoringAborted:
    """Logged here as well: a Ray worker that dies of it may show only its own log."""
    message = f"geval_client.verl.{form}: {type(error).__name__}: {error}"
    log.error("%s", message)
    return aborted(message)


def _coroutine_from_pool(coroutine: types.CoroutineType) -> Any:
    """prime calls the reward in a process pool and reads the value it sends back; a coroutine
    (compute_score_async, or veRL's async wrapper of it) cannot be sent, and prime would turn
    that TypeError into 0.0 for the sample. In a pool's worker process the failure is
    ScoringAborted naming the form to use; anywhere else, the TypeError pickle gives."""
    if multiprocessing.parent_process() is None:
        raise TypeError(f"cannot pickle {type(coroutine).__name__!r} object")
    coroutine.close()
    message = (
        f"geval_client.verl: the reward returned a coroutine ({coroutine.__qualname__}) in a process pool, which "
        "needs a number: veRL's prime reward manager calls the reward there, so it cannot run "
        "compute_score_async: set reward.custom_reward_function.name=compute_score_prime"
    )
    log.error("%s", message)
    raise aborted(message)


ForkingPickler.register(types.CoroutineType, _coroutine_from_pool)


class _Reply(dict):
    """A dict result; prime reads a non-number as float(result[0]), which would be a KeyError it
    turns into 0.0 for the whole batch: key 0 raises ScoringAborted naming the form to use."""

    def __missing__(self, key: Any) -> Any:
        if key == 0:
            raise aborted(
                "veRL's prime reward manager reads float(result[0]) and compute_score returns a dict: "
                "set reward.custom_reward_function.name=compute_score_prime"
            )
        raise KeyError(key)


def _batch_samples(
    solution_strs: Sequence[str], ground_truths: Sequence[Any], extra_infos: Sequence[Mapping[str, Any] | None],
    opts: _Options,
) -> list[Sample]:
    if not len(solution_strs) == len(ground_truths) == len(extra_infos):
        raise ValueError(
            f"got {len(solution_strs)} solution_strs, {len(ground_truths)} ground_truths and "
            f"{len(extra_infos)} extra_infos"
        )
    return [_sample(s, g, e, opts, i) for i, (s, g, e) in enumerate(zip(solution_strs, ground_truths, extra_infos))]


def _sample(
    solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None, opts: _Options, position: int,
) -> Sample:
    """position: the sample's place in the call; errors name its dataset row (extra_info["index"]) where known."""
    extra_info = extra_info or {}
    if opts.prompt_key not in extra_info:
        raise ValueError(
            f"extra_info[{opts.prompt_key!r}] must hold what the judge reads as the input (the prompt); "
            f"extra_info has {sorted(extra_info)}. Add it in the data preprocessing or set prompt_key"
        )
    row = extra_info.get("index", position)
    origin = f"extra_info[{opts.rubric_column!r}] row {row}"
    rubrics = row_rubrics(extra_info.get(opts.rubric_column), origin)
    if rubrics and opts.rubric_keys:
        raise ValueError(
            f"{origin}: the row has its own rubrics, but rubric_keys=True needs the same rubrics on every "
            "row (veRL takes a batch's keys from its first sample)"
        )
    return Sample(
        prompt=_prompt(extra_info[opts.prompt_key]),
        completion=solution_str,
        reference=reference_text(ground_truth),
        rubrics=rubrics,
        rubrics_origin=origin,
    )


def _prompt(value: Any) -> str | list[dict[str, str]]:
    """Text, or chat messages (veRL's parquet rows hold them as arrays of dicts)."""
    if isinstance(value, str):
        return value
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in value]


def _rubric_names(rubrics: Rubrics) -> tuple[str, ...]:
    """The configured rubrics' names, for the "score/<rubric>" keys."""
    names = tuple(choice.name or choice.spec.name for choice in rubric_selection(rubrics))
    if not names or not all(names):
        raise ValueError(
            "rubric_keys=True needs the rubrics named in the options (rubrics=, or GEVAL_REWARD_RUBRICS), "
            f"inline rubrics with a 'name'; got {rubrics!r}"
        )
    return names


def _reply(reward: SampleReward, opts: _Options) -> dict[str, float]:
    reply = _Reply(score=reward.reward, **sample_logs(reward))
    for name in opts.rubric_keys:
        # A failed completion gets on_error's reward under every key, as under "score"; so does a group
        # member the server never judged (its group failed for another member) with its 0.5.
        reply[f"score/{name}"] = reward.reward if reward.failed or not reward.rubric_rewards else \
            reward.rubric_rewards[name]
    return reply


class StepRewardManager:
    """A legacy veRL reward manager (the `AbstractRewardManager` call, without importing veRL)
    that places a process reward on tokens: each step's score on the last token of its step,
    one Score call per batch. A sample with no process reward among its rubrics, a failed one
    (on_error) and a gated one get their reward on their last token, as the naive manager
    places it. options: compute_score's (server, rubrics, steps, ...); compute_score itself,
    which veRL passes (its default scorer unless a custom function is set), is not called.

    Each sample's reward_extra_info holds compute_score's keys ("score": the reduced reward)
    and "steps", its number of steps (0 without a process reward)."""

    def __init__(self, tokenizer: Any, num_examine: int = 0, compute_score: Any = None,
                 reward_fn_key: str = "data_source", **options: Any) -> None:
        self.tokenizer = tokenizer
        self.options = _options(**options)

    def __call__(self, data: Any, return_dict: bool = False) -> Any:
        import torch  # veRL's dependency, not the client's

        responses = data.batch["responses"]
        prompt_length = data.batch["prompts"].shape[-1]
        lengths = data.batch["attention_mask"][:, prompt_length:].sum(dim=-1).tolist()
        ids = [responses[i][: lengths[i]].tolist() for i in range(len(data))]
        texts = [self.tokenizer.decode(row, skip_special_tokens=True) for row in ids]
        extra_infos = data.non_tensor_batch.get("extra_info", [None] * len(data))
        truths = [row.get("ground_truth") for row in data.non_tensor_batch["reward_model"]]
        rewards = self.options.scorer.rewards(_batch_samples(texts, truths, extra_infos, self.options))

        reward_tensor = torch.zeros_like(responses, dtype=torch.float32)
        extra: dict[str, list[float]] = {}
        for i, (reward, text) in enumerate(zip(rewards, texts)):
            for token, value in token_rewards(reward, text, _prefixes(self.tokenizer, ids[i]), lengths[i]).items():
                reward_tensor[i, token] = value
            for key, value in {**_reply(reward, self.options), "steps": len(reward.step_scores)}.items():
                extra.setdefault(key, []).append(value)
        return {"reward_tensor": reward_tensor, "reward_extra_info": extra} if return_dict else reward_tensor


def _prefixes(tokenizer: Any, row: list[int]) -> Callable[[int], str]:
    """prefix(k): the response's first k tokens, decoded as StepRewardManager decodes it whole."""
    return lambda k: tokenizer.decode(row[:k], skip_special_tokens=True)
