"""G-Eval rewards for OpenRLHF, both ways it takes a remote reward.

1. A Python file given to `--reward.remote_url` (`--remote_rm_url` before OpenRLHF
   0.10.2) whose `reward_func(queries, prompts, labels)` OpenRLHF calls: up to 0.9.0
   as `ray.remote(reward_func)` on chunks of a rollout batch, from 0.9.1 in a thread of
   each vLLM engine actor, one sample per call. make_reward_func returns a plain
   function, as both need:

       # geval_reward.py
       from geval_client.openrlhf import make_reward_func
       reward_func = make_reward_func("judge:50051", {"summeval-coherence": 1})

   or `from geval_client.openrlhf import reward_func`, configured by the
   environment (GEVAL_REWARD_SERVER, GEVAL_REWARD_RUBRICS; see shared/sample_rewards.py).

   What it returns is what the installed OpenRLHF gathers (reply_for): 0.8.0-0.8.2
   torch.cat the returns, so a tensor of the rewards; 0.8.3-0.8.11 torch.cat the dict's
   values, so tensors; lists from 0.9.0.

2. An HTTP URL given to `--reward.remote_url`, served by the bridge in front of the gRPC
   server (openrlhf_bridge.py). JSON carries no tensors: OpenRLHF 0.8.3-0.8.9 torch.cat the
   lists of an HTTP reply as they come and cannot take any HTTP reward server; 0.8.10-0.8.11
   take "rewards" and "scores" but not the "extra_logs" lists, which the bridge leaves out
   unless given --extra-logs (0.9.0 and later).

`query` is prompt and response decoded together (special tokens kept), so the
completion is cut out of it: after the prompt (compared exactly, then ignoring
whitespace the tokenizer may have changed, then as the tail OpenRLHF keeps of a
prompt it truncated from the left), without the end-of-sequence markers.
The judge reads the prompt as OpenRLHF passes it (with its chat template), and
the label as the human reference. OpenRLHF hands a reward one field per sample,
the dataset column named by `--data.label_key`, so a label that is an object (a
struct column, or JSON text) carries the rest: "prompt" (what the judge reads as
the input), "reference", and under `rubric_column` ("rubrics" by default) the
sample's own rubric, a rubric dict or a served name (or several, weighted:
shared/row_rubrics.py), replacing the configured rubrics for that sample.

Groupwise (make_reward_func(..., groupwise=True, n_samples_per_prompt=N), the bridge's
--groupwise --n-samples-per-prompt N): each sample is judged against the other samples
of its group, a prompt's (and reference's) samples in the call cut into groups of N
(ScoreGroups). That needs a call to hold whole groups: OpenRLHF 0.8.x-0.9.0 pass the
rollout batch in chunks of micro_rollout_batch_size to a reward_func (Ray tasks in other
processes, so the pieces of a cut group cannot be joined), and in one request per bridge
URL; 0.9.1-0.11 pass one sample per call. A call holding part of a group is refused,
naming the flags that keep groups whole, unless the schedule is "anchor" (each completion
against its reference, which needs no peers).

OpenRLHF needs a number for every sample: see shared/sample_rewards.py for what a
completion the server cannot score gets (on_error) and what raises. From 0.9.1
OpenRLHF logs what a reward_func raises at INFO and goes on with no reward, so the
cause is logged here at ERROR before it is raised; the bridge answers it with 422.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..defaults import DEFAULT_TIMEOUT_S
from ..errors import ItemNotScored, RewardServerError
from ..requests import Rubrics
from ..types import ScoringMode
from .shared.diagnostics import SAMPLE_LOG_KEYS, sample_logs
from .shared.failures import OnError
from .shared.groups import group_key, groups_by_key, groups_of
from .shared.row_rubrics import row_rubrics
from .shared.sample_rewards import SampleScorer, reference_text
from .shared.scoring import Groupwise, Sample, SampleReward
from .shared.trainer_text import without_end_markers

log = logging.getLogger(__name__)

RUBRIC_COLUMN = "rubrics"

MIN_PROMPT_TAIL = 64  # characters of a left-truncated prompt that must match to cut there


def completion_from_query(query: str, prompt: str) -> str:
    """The response part of OpenRLHF's `query` (prompt + response decoded together)."""
    end = _prompt_end(query, prompt)
    if end is None:
        raise ValueError(
            f"query does not start with its prompt: query starts {query[:60]!r}, prompt {prompt[:60]!r}"
        )
    return without_end_markers(query[end:])


def _prompt_end(query: str, prompt: str) -> int | None:
    if query.startswith(prompt):
        return len(prompt)
    matched = _match_ignoring_whitespace(query, prompt)
    if matched is not None:
        return matched
    for start in range(1, len(prompt) - MIN_PROMPT_TAIL + 1):  # OpenRLHF keeps a long prompt's tail
        if query.startswith(prompt[start:]):
            return len(prompt) - start
    return None


def _match_ignoring_whitespace(query: str, prompt: str) -> int | None:
    """Where the prompt ends in query when only their whitespace differs, else None."""
    i = 0
    for char in prompt:
        if char.isspace():
            continue
        while i < len(query) and query[i].isspace():
            i += 1
        if i == len(query) or query[i] != char:
            return None
        i += 1
    return i


def label_fields(label: Any, rubric_column: str = RUBRIC_COLUMN) -> dict[str, Any]:
    """A label is the reference; an object (or JSON text of one) may set prompt, reference
    and, under rubric_column, the sample's own rubric."""
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            label = json.loads(label)
        except json.JSONDecodeError:
            return {"reference": label}
    if isinstance(label, Mapping):
        known = ["prompt", "reference", rubric_column]
        unknown = set(label) - set(known)
        if unknown:
            raise ValueError(f"label: unknown keys {sorted(unknown)}; a label object sets {', '.join(known)}")
        return dict(label)
    return {"reference": label}


def samples_from(
    queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None, rubric_column: str = RUBRIC_COLUMN
) -> list[Sample]:
    if labels is None:
        labels = [None] * len(queries)
    if not len(queries) == len(prompts) == len(labels):
        raise ValueError(f"got {len(queries)} queries, {len(prompts)} prompts and {len(labels)} labels")
    samples = []
    for row, (query, prompt, label) in enumerate(zip(queries, prompts, labels)):
        fields = label_fields(label, rubric_column)
        origin = f"label[{rubric_column!r}] row {row}"
        samples.append(Sample(
            prompt=fields.get("prompt") or prompt,
            completion=completion_from_query(query, prompt),
            reference=reference_text(fields.get("reference")),
            rubrics=row_rubrics(fields.get(rubric_column), origin),
            rubrics_origin=origin,
        ))
    return samples


def openrlhf_reply(rewards: Sequence[SampleReward]) -> dict[str, Any]:
    """OpenRLHF's reward reply: `rewards` drive the advantage, `scores` (in [0, 1]) its
    dynamic filtering, `extra_logs` are logged per sample."""
    return {
        "rewards": [r.reward for r in rewards],
        "scores": [min(max(r.reward, 0.0), 1.0) for r in rewards],
        "extra_logs": _extra_logs(rewards),
    }


def _extra_logs(rewards: Sequence[SampleReward]) -> dict[str, list[float]]:
    """diagnostics.sample_logs per sample, one list per key, each key prefixed `geval_`."""
    logs = [sample_logs(r) for r in rewards]
    return {f"geval_{key}": [entry[key] for entry in logs] for key in SAMPLE_LOG_KEYS}


@dataclass(frozen=True)
class OpenRLHFReward:
    """OpenRLHF's reward for one configuration; the bridge serves it, make_reward_func wraps it
    in a function."""

    scorer: SampleScorer
    rubric_column: str = RUBRIC_COLUMN  # the label object's key holding a sample's own rubric
    groupwise: Groupwise | None = None  # set: each sample judged against its prompt's samples in the call
    n_samples_per_prompt: int | None = None  # groupwise: OpenRLHF's --n_samples_per_prompt, a group's size

    def __post_init__(self) -> None:
        if self.groupwise is None:
            if self.n_samples_per_prompt is not None:
                raise ValueError("n_samples_per_prompt is the size of a group: it needs groupwise")
            return
        self.scorer.check_groupwise()
        if self.groupwise.schedule == "anchor":
            return
        if self.n_samples_per_prompt is None:
            raise ValueError(
                "groupwise: n_samples_per_prompt (OpenRLHF's --n_samples_per_prompt) is needed to tell a whole "
                "group from part of one (only schedule='anchor', which judges each sample against its reference, "
                f"goes without). {HOW_TO_KEEP_GROUPS_WHOLE}"
            )
        if self.n_samples_per_prompt < 2:
            raise ValueError(f"groupwise: n_samples_per_prompt must be at least 2 (a sample alone is compared "
                             f"with nobody), got {self.n_samples_per_prompt}")

    @classmethod
    def configure(
        cls, rubric_column: str = RUBRIC_COLUMN, groupwise: bool = False, schedule: str | None = None,
        aggregation: str = "mean_win_probability", n_samples_per_prompt: int | None = None, **scorer_options: Any,
    ) -> OpenRLHFReward:
        """scorer_options: SampleScorer.configure's; schedule, aggregation and n_samples_per_prompt need groupwise."""
        if not groupwise and (schedule is not None or aggregation != "mean_win_probability"):
            raise ValueError("schedule and aggregation choose how groups are judged: they need groupwise")
        return cls(SampleScorer.configure(**scorer_options), rubric_column,
                   Groupwise(schedule, aggregation) if groupwise else None, n_samples_per_prompt)

    def __call__(self, queries, prompts, labels=None, **kwargs) -> dict[str, Any]:
        samples = samples_from(queries, prompts, labels, self.rubric_column)
        if self.groupwise is None:
            return openrlhf_reply(self.scorer.rewards(samples))
        keys = [group_key(prompt, sample.reference) for prompt, sample in zip(prompts, samples)]
        if self.n_samples_per_prompt is None:  # the anchor schedule: each sample judged alone, any cut will do
            groups = groups_by_key(keys)
        else:
            groups, parts = groups_of(keys, self.n_samples_per_prompt)
            if parts:
                raise ValueError(_parts_message(parts, len(samples), self.n_samples_per_prompt))
        return openrlhf_reply(self.scorer.groupwise_rewards(samples, groups, self.groupwise))


HOW_TO_KEEP_GROUPS_WHOLE = (
    "OpenRLHF 0.8.x-0.9.0 pass a reward_func file consecutive chunks of --micro_rollout_batch_size samples, and "
    "the bridge the rollout batch shared equally among its URLs: keep --micro_rollout_batch_size a multiple of "
    "--n_samples_per_prompt, --eval_n_samples_per_prompt equal to it and --use_dynamic_batch off (a file), or give "
    "the bridge one URL. OpenRLHF 0.9.1 and later call a reward with one sample at a time and cannot judge groups: "
    "use schedule='anchor' there."
)


def _parts_message(parts: list[list[int]], samples: int, n_samples_per_prompt: int) -> str:
    """Why a call holding part of a group is refused, and how to configure OpenRLHF so that none does."""
    if samples == 1:
        what = "none of the 1 samples of this call has a peer to be compared with, so its reward would be 0.5"
    else:
        more = f" (and {len(parts) - 1} more such prompts)" if len(parts) > 1 else ""
        what = (f"this call holds {len(parts[0])} of its {samples} samples with the prompt of sample {parts[0][0]}"
                f"{more}, not a multiple of n_samples_per_prompt={n_samples_per_prompt}: part of a group whose "
                "rest is in another call, and judged apart its rewards would not be its group's")
    return f"groupwise: {what}. {HOW_TO_KEEP_GROUPS_WHOLE}"


def make_reward_func(
    server: str | None = None,
    rubrics: Rubrics = None,
    on_error: OnError | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    rubric_column: str = RUBRIC_COLUMN,
    mode: ScoringMode | str | None = None,
    groupwise: bool = False,
    schedule: str | None = None,
    aggregation: str = "mean_win_probability",
    n_samples_per_prompt: int | None = None,
    gate: str | None = None,
    gate_reward: float | None = None,
    steps: Mapping[str, str] | None = None,
) -> Callable[..., Any]:
    """A `reward_func` for a --reward.remote_url file.

    A plain function, as every OpenRLHF version takes it: up to 0.9.0 OpenRLHF calls
    `ray.remote(reward_func)`, which refuses anything but a function or a class (Ray ships it
    with cloudpickle); from 0.9.1 it calls it in a thread of each vLLM engine actor.

    Args:
        server: "host:port" or a fleet; None: $GEVAL_REWARD_SERVER, else localhost:50051.
        rubrics: a name, a list or {name: weight}; None: $GEVAL_REWARD_RUBRICS, else the
            server's default (the environment is read in shared/sample_rewards.py).
        on_error: "min" or a float, for a completion that caused its own failure; None:
            $GEVAL_REWARD_ON_ERROR, else "min".
        timeout: each call's deadline in seconds, gRPC's retries included.
        rubric_column: the label object's key holding a sample's own rubric.
        mode: how G-Eval rubrics read the slot, e.g. Reasoning(256) or "reasoning:256".
        groupwise: judge each sample against the samples of its prompt in the same call, with
            schedule and aggregation as ScoreGroups takes them (see the module docstring for
            when a call holds whole groups).
        n_samples_per_prompt: with groupwise, OpenRLHF's --n_samples_per_prompt: a prompt's
            samples are cut into groups of it, and a call holding part of a group is refused,
            naming the OpenRLHF flags that keep groups whole. Needed unless schedule="anchor".
        gate: a rule checked first ("math-equal", against the label's reference): a sample that
            fails it gets gate_reward (default 0.0) and the judge does not read it. None:
            $GEVAL_REWARD_GATE, else none.
        steps: how process rewards split and reduce, {"delimiter": ..., "reduction": ...};
            a key left out: $GEVAL_REWARD_STEP_DELIMITER, $GEVAL_REWARD_STEP_REDUCTION, else the
            server's default. OpenRLHF takes one reward per sample: the reduced one.

    Returns:
        reward_func(queries, prompts, labels) -> {"rewards", "scores", "extra_logs"} (openrlhf_reply),
        in the form the installed OpenRLHF gathers (reply_for): a tensor of the rewards under
        0.8.0-0.8.2, the same dict of tensors under 0.8.3-0.8.11, lists otherwise.

    Example:
        reward_func = make_reward_func("judge:50051", {"summeval-coherence": 1})
        reward_func([prompt + "A library will be built.<|im_end|>"], [prompt], ["The reference."])
        # -> {"rewards": [0.71], "scores": [0.71], "extra_logs": {"geval_label_mass": [0.93], ...}}
    """
    reward = OpenRLHFReward.configure(
        rubric_column, groupwise, schedule, aggregation, n_samples_per_prompt,
        server=server, rubrics=rubrics, on_error=on_error, timeout=timeout, mode=mode, gate=gate,
        gate_reward=gate_reward, steps=steps,
    )

    def reward_func(queries, prompts, labels=None, **kwargs) -> Any:
        return _logged(reward, queries, prompts, labels)

    return reward_func


def reward_func(queries, prompts, labels=None, **kwargs) -> Any:
    """OpenRLHF's `reward_func`, configured from the environment (GEVAL_REWARD_SERVER,
    GEVAL_REWARD_RUBRICS, GEVAL_REWARD_ON_ERROR, GEVAL_REWARD_MODE, GEVAL_REWARD_AUTH_TOKEN)."""
    return _logged(OpenRLHFReward(SampleScorer.configure()), queries, prompts, labels)


def _logged(reward: OpenRLHFReward, queries, prompts, labels) -> Any:
    """OpenRLHF 0.9.1-0.11 catches what a reward_func raises and logs it at INFO (the reward
    becomes None and training fails later on it): the cause is logged here at ERROR first."""
    try:
        reply = reward(queries, prompts, labels)
    except (ItemNotScored, RewardServerError, ValueError, TypeError) as error:
        log.error("geval reward_func: %s: %s", type(error).__name__, error)
        raise
    return reply_for(installed_openrlhf(), reply)


def installed_openrlhf() -> tuple[int, ...] | None:
    """The OpenRLHF version installed where the reward_func runs (its Ray worker or vLLM engine
    actor share OpenRLHF's environment), as numbers; None when it is not installed."""
    try:
        text = importlib.metadata.version("openrlhf")
    except importlib.metadata.PackageNotFoundError:
        return None
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


def reply_for(version: tuple[int, ...] | None, reply: dict[str, Any]) -> Any:
    """The reply in the form OpenRLHF `version` gathers (each read in its wheel):

    - 0.8.0-0.8.2 torch.cat the reward_funcs' returns (experience_maker.py,
      `torch.cat(rewards_list, dim=0)`): the rewards as a 1-D tensor.
    - 0.8.3-0.8.9 torch.cat each reply's "rewards", "scores" and "extra_logs" values
      (update_samples_with_rewards), 0.8.10-0.8.11 still the "extra_logs" values: tensors.
    - 0.9.0 and later take lists (torch.as_tensor; from 0.9.1 one sample per call): as is.
    """
    if version is None or not (0, 8) <= version < (0, 9):
        return reply
    import torch  # OpenRLHF's own dependency, where the version says it is installed

    if version < (0, 8, 3):
        return torch.tensor(reply["rewards"], dtype=torch.float32)
    return {
        "rewards": torch.tensor(reply["rewards"], dtype=torch.float32),
        "scores": torch.tensor(reply["scores"], dtype=torch.float32),
        "extra_logs": {k: torch.tensor(v, dtype=torch.float32) for k, v in reply["extra_logs"].items()},
    }


