"""A TRL reward function that judges each GRPO/RLOO group within itself (ScoreGroups):
the completions of one prompt compared in pairs, both orders read, one reward each.

    from geval_client import AsyncGroupwiseReward
    reward = AsyncGroupwiseReward("judge-host:50051", "summeval-coherence", num_generations=8)
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], args=GRPOConfig(num_generations=8), ...)

TRL gives a reward function its batch with each prompt's completions side by side, but
not `num_generations`. Groups are the completions of the same prompt (and reference),
wherever they stand (groups.py), or cut every `num_generations` completions when it is
given, in which case every group must hold one prompt (an error otherwise: a per-device
batch that is not a multiple of num_generations splits a group across processes, and the
split parts would be judged apart). A completion the server could not compare gets
`on_error` ("min", a float, or "exclude": None, which TRL leaves out).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from .client import AsyncRewardClient, RewardClient
from .defaults import DEFAULT_TARGET, DEFAULT_TIMEOUT_S
from .failures import MIN, OnError, parse_on_error
from .groups import group_key, groups_by_key
from .requests import Rubrics
from .reward_batch import completion_text, judge_prompt
from .reward_names import reward_name
from .types import GroupResult

log = logging.getLogger(__name__)


def find_groups(prompts: Sequence[Any], references: Sequence[str | None],
                num_generations: int | None) -> list[Sequence[int]]:
    """The indices of the batch's groups (see the module docstring)."""
    keys = [group_key(p, r) for p, r in zip(prompts, references)]
    if num_generations is None:
        return groups_by_key(keys)
    if num_generations < 1 or len(keys) % num_generations:
        raise ValueError(f"{len(keys)} completions do not split into groups of num_generations={num_generations}; "
                         "make the per-device batch a multiple of num_generations, or leave num_generations unset")
    groups = [range(s, s + num_generations) for s in range(0, len(keys), num_generations)]
    for group in groups:
        if len({keys[i] for i in group}) != 1:
            raise ValueError(f"completions {group.start}-{group.stop - 1} should be one prompt's group of "
                             f"{num_generations} but hold several prompts")
    return groups


def _column(columns: dict, name: str) -> list:
    if name not in columns:
        raise ValueError(f"column {name!r} is not in the dataset; columns passed by the trainer: {sorted(columns)}")
    return list(columns[name])


class _GroupwiseRewardBase:
    """server, rubrics, timeout, token: as GEvalReward's. schedule: None (all pairs up to 8
    completions, neighbours beyond), "all_pairs", "neighbours" or "anchor" (each against the
    row's reference: needs reference_column). aggregation: "mean_win_probability" or
    "bradley_terry". num_generations: cut groups at this size (checked), else by prompt.
    source_column: a column the judge reads as the input instead of the policy's prompt."""

    def __init__(
        self,
        server: str = DEFAULT_TARGET,
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
        token: str | None = None,
    ) -> None:
        self.server, self.rubrics, self.num_generations = server, rubrics, num_generations
        self.schedule, self.aggregation = schedule, aggregation
        self.reference_column, self.source_column = reference_column, source_column
        self._on_error = parse_on_error(on_error)
        self._client_args = dict(target=server, timeout=timeout, token=token)
        self.__name__ = name or reward_name(rubrics).replace("geval", "geval_groupwise", 1)
        self.last_metrics: dict[str, float] = {}
        self._client = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_client": None}

    def _request(self, prompts, completions, columns) -> tuple[list[Sequence[int]], list[dict]]:
        references = _column(columns, self.reference_column) if self.reference_column else [None] * len(prompts)
        sources = _column(columns, self.source_column) if self.source_column else prompts
        groups = find_groups(prompts, references, self.num_generations)
        wire = [{"prompt": judge_prompt(sources[g[0]]), "completions": [completion_text(completions[i]) for i in g],
                 **({"reference": references[g[0]]} if references[g[0]] is not None else {})}
                for g in groups]
        return groups, wire

    def _rewards(self, groups: list[Sequence[int]], results: Sequence[GroupResult], size: int) -> list[float | None]:
        rewards: list[float | None] = [None] * size
        consistency, mass = [], []
        for group, result in zip(groups, results):
            if not result.ok:
                log.warning("%s: a group could not be judged: %s", self.__name__, result.error.message)
                continue
            for i, completion in zip(group, result.completions):
                caused = completion.error is not None and completion.error.caused_by_completion
                rewards[i] = completion.reward if completion.ok else (self._on_error if caused else None)
            consistency += [r.position_consistency for r in result.rubrics if r.position_consistency is not None]
            mass += [r.label_mass for r in result.rubrics if r.label_mass is not None]
        if consistency:
            self.last_metrics = {"position_consistency": sum(consistency) / len(consistency),
                                 "label_mass": sum(mass) / len(mass)}
        return rewards

    def _call_options(self) -> dict:
        return {"rubrics": self.rubrics, "schedule": self.schedule, "aggregation": self.aggregation}

    def _log(self, columns: dict) -> None:
        log_metric = columns.get("log_metric")
        for key, value in self.last_metrics.items() if log_metric is not None else ():
            log_metric(f"{self.__name__}/{key}", value)


class GroupwiseReward(_GroupwiseRewardBase):
    """Blocking form, for loops of your own (options: see _GroupwiseRewardBase)."""

    def __call__(self, prompts, completions, completion_ids=None, **columns) -> list[float | None]:
        groups, wire = self._request(prompts, completions, columns)
        if self._client is None:
            self._client = RewardClient(**self._client_args)
        rewards = self._rewards(groups, self._client.score_groups(wire, **self._call_options()), len(prompts))
        self._log(columns)
        return rewards


class AsyncGroupwiseReward(_GroupwiseRewardBase):
    """Coroutine form, for TRL's trainers (options: see _GroupwiseRewardBase)."""

    async def __call__(self, prompts, completions, completion_ids=None, **columns) -> list[float | None]:
        groups, wire = self._request(prompts, completions, columns)
        loop = asyncio.get_running_loop()
        if self._client is None or getattr(self, "_loop", None) is not loop:
            self._client, self._loop = AsyncRewardClient(**self._client_args), loop
        rewards = self._rewards(groups, await self._client.score_groups(wire, **self._call_options()), len(prompts))
        self._log(columns)
        return rewards

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_loop", None)
        return state
