"""Reward functions for TRL's GRPOTrainer and RLOOTrainer, backed by the server.

    from geval_client import AsyncGEvalReward
    reward = AsyncGEvalReward("judge-host:50051", {"summeval-coherence": 1, "summeval-relevance": 2})
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], ...)

TRL calls `reward(prompts=..., completions=..., completion_ids=..., **columns)` with
every other dataset column as a keyword, plus `log_metric` and `log_extra`, which take
the diagnostics (`<name>/<metric>`, and per-completion columns in TRL's completions table).
GEvalReward scores each completion (one Score RPC a call); GroupwiseReward judges each
GRPO/RLOO group within itself (one ScoreGroups RPC): the completions of one prompt
compared in pairs, both orders read, one reward each.

In a TRL trainer use the Async forms: TRL runs every sync reward function one after
another and only then starts the async ones, together, so a sync G-Eval reward holds
every async reward back for the length of its RPC. The blocking forms serve loops of
your own, from several threads if need be (TRL's async rollout worker runs sync rewards
in threads).

Every form pickles and deep-copies (TRL's async rollout worker and Ray ship reward
functions to other processes): a copy connects on its first call (shared/scoring.py). Nothing
here imports trl: the same callables serve any training loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from ..defaults import DEFAULT_TARGET, DEFAULT_TIMEOUT_S
from ..requests import Rubric, Rubrics, check_steps
from ..retry import RetryPolicy
from ..transport import Targets, TLSOptions
from ..types import GroupResult, ItemResult, Logprobs, ScoringMode
from .shared.diagnostics import batch_metrics, completion_columns
from .shared.failures import MIN, OnError, grouped_rewards, parse_on_error
from .shared.groups import group_key, groups_by_key, groups_of
from .shared.reward_names import claim_name, reward_name, rubrics_key
from .shared.row_rubrics import rubric_error
from .shared.scoring import Groupwise, Sample, Scorer
from .shared.trainer_text import completion_text, judge_prompt
from .shared.trl_batch import RewardBatch, build_batch, dataset_column

log = logging.getLogger(__name__)


class _Reward:
    """What every form shares: its Scorer, the name TRL logs it under (shared/reward_names.py) and
    the last call's metrics (`last_metrics`, for loops without log_metric)."""

    def __init__(self, scorer: Scorer, name: str) -> None:
        self._scorer = scorer
        self._target = scorer.label  # a bad address or TLS file fails here
        self.__name__ = name
        self.last_metrics: dict[str, float] = {}
        claim_name(name, self, self._scoring())

    def _scoring(self) -> tuple:
        """Everything that makes two rewards give different values."""
        raise NotImplementedError

    def _log(self, metrics: dict[str, float], columns: dict) -> None:
        self.last_metrics = metrics
        log_metric = columns.get("log_metric")
        for key, value in metrics.items() if log_metric is not None else ():
            log_metric(f"{self.__name__}/{key}", value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.__name__!r}, server={self._target!r}, rubrics={self.rubrics!r})"


class _Blocking(_Reward):
    def __call__(self, prompts, completions, completion_ids=None, **columns) -> list[float | None]:
        request = self._request(prompts, completions, completion_ids, columns)
        started = time.perf_counter()
        results = self._send(request)
        return self._finish(request, results, time.perf_counter() - started, columns)

    def close(self) -> None:
        """Closes this process's connection to the server; the next call opens another."""
        self._scorer.close()


class _Coroutine(_Reward):
    async def __call__(self, prompts, completions, completion_ids=None, **columns) -> list[float | None]:
        request = self._request(prompts, completions, completion_ids, columns)
        started = time.perf_counter()
        results = await self._send_async(request)
        return self._finish(request, results, time.perf_counter() - started, columns)

    async def close(self) -> None:
        """Closes the running event loop's connection to the server; the next call opens another."""
        await self._scorer.aclose()


class _Pointwise(_Reward):
    """The options of GEvalReward and AsyncGEvalReward; timeout, retry, tls and token are RewardClient's.

    Args:
        server: as RewardClient's target (one address, a list, or dns:///name:port).
        rubrics: a name, a list of names, or {name: weight}; the reward is the weighted mean.
        on_error: what a completion gets when the server cannot score it because of the
            completion (empty, too long): "min" (0.0, the default), a float, or "exclude";
            a failure the completion did not cause is always excluded (see shared/failures.py).
        reference_column: dataset column with the human reference, passed to rubrics that
            use one and, with score_references, also scored to measure self-preference.
        source_column: dataset column the judge reads as the input instead of the policy's
            prompt (e.g. the bare article when the prompt wraps it in instructions).
        rubric_column: dataset column with each row's own rubric (a rubric dict or a served
            name; shared/row_rubrics.py), scored instead of `rubrics`, which score rows holding None.
        mode: how G-Eval rubrics read the score slot: Logprobs() (the default), Sampling(n) or
            Reasoning(max_tokens), whose evaluations go to TRL's completions table.
        name: TRL's name for this reward in its logs (`rewards/<name>/mean`); by default
            derived from the rubrics (shared/reward_names.py).
        gate: a rule checked first, e.g. "math-equal" against reference_column's answer: a
            completion that fails it gets gate_reward (default 0.0) and the judge does not read it.
        steps: how process rewards (process-reward-model, step-correctness) split and reduce,
            {"delimiter": ..., "reduction": ...}; None: the server's defaults (blank lines, its
            reduction). TRL trains on the reduced reward and logs the step scores.
    """

    def __init__(
        self,
        server: Targets = DEFAULT_TARGET,
        rubrics: Rubrics = None,
        *,
        on_error: OnError = MIN,
        reference_column: str | None = None,
        source_column: str | None = None,
        rubric_column: str | None = None,
        score_references: bool = True,
        mode: ScoringMode = Logprobs(),
        name: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy = RetryPolicy(),
        tls: TLSOptions | None = None,
        token: str | None = None,
        gate: Rubric | None = None,
        gate_reward: float | None = None,
        steps: Mapping[str, str] | None = None,
    ) -> None:
        if steps is not None:
            check_steps(steps)
        self.rubrics, self.on_error, self.mode = rubrics, on_error, mode
        self.reference_column, self.source_column, self.rubric_column = reference_column, source_column, rubric_column
        self.score_references = score_references
        scorer = Scorer(server, rubrics, parse_on_error(on_error), mode, timeout, retry, tls, token, gate, gate_reward,
                        steps)
        super().__init__(scorer, name if name is not None else reward_name(rubrics, rubric_column))

    def _scoring(self) -> tuple:
        return (self._target, rubrics_key(self.rubrics), self.rubric_column, self._scorer.on_error,
                self.reference_column, self.source_column, self.mode, repr(self._scorer.gate),
                self._scorer.gate_reward, repr(self._scorer.steps))

    def _request(self, prompts, completions, completion_ids, columns) -> RewardBatch:
        return build_batch(
            prompts, completions, completion_ids, columns,
            source_column=self.source_column,
            reference_column=self.reference_column,
            score_references=self.score_references,
            rubric_column=self.rubric_column,
        )

    def _send(self, batch: RewardBatch) -> list[ItemResult]:
        return self._scorer.score(batch.items)

    def _send_async(self, batch: RewardBatch) -> Awaitable[list[ItemResult]]:
        return self._scorer.score_async(batch.items)

    def _finish(
        self, batch: RewardBatch, results: Sequence[ItemResult], latency_s: float, columns: dict
    ) -> list[float | None]:
        rewards = grouped_rewards(results[: batch.completions], batch.groups, self._scorer.on_error)
        failed = [i for i, r in enumerate(results[: batch.completions]) if not r.ok]
        if failed:
            first = rubric_error(results[failed[0]].error, batch.rubric_origins[failed[0]])
            log.warning(
                "%s: the server could not score %d of %d completions (on_error=%r for those the completion "
                "caused, the others excluded); first: %s",
                self.__name__, len(failed), batch.completions, self.on_error, first,
            )
        self._log(batch_metrics(batch, results, latency_s), columns)
        log_extra = columns.get("log_extra")
        for key, values in completion_columns(batch, results).items() if log_extra is not None else ():
            log_extra(f"{self.__name__}/{key}", values)
        return rewards


class GEvalReward(_Blocking, _Pointwise):
    """Blocking reward function: one Score RPC per call, one reward per completion.

    Args: see _Pointwise. Returns: a reward in [0, 1] per completion (on_error's for one that
    broke the judge; None where excluded).

    Example:
        reward = GEvalReward("judge:50051", "summeval-coherence")
        reward(prompts=["Summarize: ..."], completions=["A library will be built."])  # -> [0.71]
    """


class AsyncGEvalReward(_Coroutine, _Pointwise):
    """GEvalReward as a coroutine: TRL awaits it on its own event loop, concurrently with its
    other async rewards.

    Example:
        reward = AsyncGEvalReward("judge:50051", {"summeval-coherence": 1, "summeval-relevance": 2})
        trainer = GRPOTrainer(model=..., reward_funcs=[reward], ...)
    """


def find_groups(prompts: Sequence[Any], references: Sequence[str | None],
                num_generations: int | None) -> list[list[int]]:
    """The indices of each group: each prompt's (and reference's) completions, wherever they stand,
    cut into groups of num_generations in batch order (TRL keeps a group side by side; two groups of
    one prompt are judged apart). A prompt with no multiple of num_generations completions here is
    part of a group whose rest another process holds: refused, naming the setting that cuts it.
    num_generations None (the anchor schedule, which judges each completion alone against its
    reference): each prompt's completions are one group."""
    keys = [group_key(p, r) for p, r in zip(prompts, references)]
    if num_generations is None:
        return groups_by_key(keys)
    groups, parts = groups_of(keys, num_generations)
    if parts:
        raise ValueError(
            f"groupwise: this call holds {len(parts[0])} completions of the prompt of completion {parts[0][0]}"
            f"{f' (and {len(parts) - 1} more such prompts)' if len(parts) > 1 else ''}, not a multiple of "
            f"num_generations={num_generations}: part of a group whose rest another process holds, and judging "
            "part of a group would rank its members against peers TRL does not compare them with. TRL calls a "
            "reward in each process with per_device_train_batch_size x steps_per_generation completions "
            "(evaluation: per_device_eval_batch_size, in groups of num_generations_eval): make those multiples of "
            "num_generations and leave num_generations_eval unset"
        )
    return groups


class _Groupwise(_Reward):
    """The options of GroupwiseReward and AsyncGroupwiseReward: server, rubrics, reference_column,
    source_column, name, timeout, retry, tls and token as GEvalReward's (the default name is
    `geval_groupwise_` and the rubrics), and those below.

    Args:
        num_generations: GRPOConfig's num_generations, the size of a group (TRL does not pass it
            to reward functions): each prompt's completions are cut into groups of it, and a call
            holding part of a group is refused (find_groups). Needed unless schedule="anchor".
        schedule: None (all pairs up to 8 completions, neighbours beyond), "all_pairs",
            "neighbours" or "anchor" (each against the row's reference: needs reference_column).
        aggregation: "mean_win_probability" or "bradley_terry".
        on_error: what a completion the server could not compare because of the completion
            gets: "min" (0.0, the default), a float, or "exclude" (None, which TRL leaves out).
        gate: a rule checked first, as GEvalReward's: a completion that fails it gets gate_reward
            and is compared with nobody; the others are compared among themselves.
        steps: as GEvalReward's, for a process reward among the rubrics (each completion scored alone).
    """

    def __init__(
        self,
        server: Targets = DEFAULT_TARGET,
        rubrics: Rubrics = None,
        *,
        num_generations: int | None = None,
        schedule: str | None = None,
        aggregation: str = "mean_win_probability",
        reference_column: str | None = None,
        source_column: str | None = None,
        on_error: OnError = MIN,
        name: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy = RetryPolicy(),
        tls: TLSOptions | None = None,
        token: str | None = None,
        gate: Rubric | None = None,
        gate_reward: float | None = None,
        steps: Mapping[str, str] | None = None,
    ) -> None:
        if steps is not None:
            check_steps(steps)
        if num_generations is None and schedule != "anchor":
            raise ValueError(
                "groupwise: num_generations (GRPOConfig's) is needed to tell a whole group from part of one; "
                "only schedule='anchor', which judges each completion against its reference, goes without"
            )
        if num_generations is not None and num_generations < 2:
            raise ValueError(f"groupwise: num_generations must be at least 2 (a completion alone is compared with "
                             f"nobody), got {num_generations}")
        self.rubrics, self.num_generations = rubrics, num_generations
        self.groupwise = Groupwise(schedule, aggregation)
        self.reference_column, self.source_column = reference_column, source_column
        scorer = Scorer(server, rubrics, parse_on_error(on_error), timeout=timeout, retry=retry, tls=tls, token=token,
                        gate=gate, gate_reward=gate_reward, steps=steps)
        super().__init__(scorer, name or reward_name(rubrics).replace("geval", "geval_groupwise", 1))

    def _scoring(self) -> tuple:
        return (self._target, rubrics_key(self.rubrics), self.groupwise, self._scorer.on_error,
                self.reference_column, self.source_column, repr(self._scorer.gate), self._scorer.gate_reward,
                repr(self._scorer.steps))

    def _request(self, prompts, completions, completion_ids, columns) -> tuple[list[Sample], list[Sequence[int]]]:
        rows = len(prompts)
        references = dataset_column(columns, self.reference_column, rows) if self.reference_column else [None] * rows
        sources = dataset_column(columns, self.source_column, rows) if self.source_column else prompts
        samples = [Sample(judge_prompt(s), completion_text(c), r) for s, c, r in zip(sources, completions, references)]
        anchored = self.groupwise.schedule == "anchor"  # each completion judged alone: any cut will do
        return samples, find_groups(prompts, references, None if anchored else self.num_generations)

    def _send(self, request: tuple[list[Sample], list[Sequence[int]]]) -> list[GroupResult]:
        return self._scorer.score_groups(*request, self.groupwise)

    def _send_async(self, request: tuple[list[Sample], list[Sequence[int]]]) -> Awaitable[list[GroupResult]]:
        return self._scorer.score_groups_async(*request, self.groupwise)

    def _finish(
        self, request: tuple[list[Sample], list[Sequence[int]]], results: Sequence[GroupResult], latency_s: float,
        columns: dict,
    ) -> list[float | None]:
        samples, groups = request
        rewards = self._scorer.group_rewards(groups, results, len(samples))
        unscored = [r.unscored for r in rewards if r.unscored is not None]
        if unscored:
            log.warning("%s: the server could not judge %d of %d completions (excluded); first: %s",
                        self.__name__, len(unscored), len(rewards), unscored[0])
        metrics = {"latency_s": latency_s}
        for key in ("position_consistency", "label_mass"):
            values = [v for result in results for r in result.rubrics if (v := getattr(r, key)) is not None]
            if values:
                metrics[key] = sum(values) / len(values)
        self._log(metrics, columns)
        return [r.reward for r in rewards]


class GroupwiseReward(_Blocking, _Groupwise):
    """Blocking groupwise reward, for loops of your own: one ScoreGroups RPC per call.

    Args: see _Groupwise. Returns: per completion its reward among its group's, in [0, 1]
    (0.5 alone; on_error's for one that broke the judge; None where excluded).

    Example:
        reward = GroupwiseReward("judge:50051", "summeval-coherence", num_generations=2)
        reward(prompts=["P", "P"], completions=["A long, faithful summary.", "Short."])  # -> [0.8, 0.2]
    """


class AsyncGroupwiseReward(_Coroutine, _Groupwise):
    """GroupwiseReward as a coroutine, for TRL's trainers.

    Example:
        reward = AsyncGroupwiseReward("judge:50051", "summeval-coherence", num_generations=8)
        trainer = GRPOTrainer(model=..., reward_funcs=[reward], args=GRPOConfig(num_generations=8), ...)
    """
