"""SkyRL's environment (skyrl-gym): a conversation the judge scores, whose step returns the reward.

SkyRL's generator (skyrl.train's SkyRLGymGenerator, 0.3) makes one environment per trajectory,
`skyrl_gym.make(env_class, env_config=..., extras=...)`: env_class is the dataset row's
`env_class` column (else `environment.env_class`), extras are the row's other columns with
`max_turns` (generator.max_turns) added. It calls init(prompt) with the row's chat messages,
then step(reply) on each reply the policy writes until step says done, and puts each step's
reward on the last token of its turn. skyrl-gym finds an environment by id in a registry of its
process, filled by `register(id, entry_point)`: register_geval_env registers GEvalEnv, with its
options, and is called where SkyRL's examples call register, inside the Ray task that runs the
trainer.

An episode lasts extras["max_turns"] replies (1 when absent). After each reply but the last the
environment answers with the next user message: the row's `follow_ups[k]`, else the option
`follow_up`. The judge reads the conversation so far (the prompt, the earlier replies and
follow-ups) as its input and the reply as the completion, with the row's
`reward_spec.ground_truth` as the reference when it is text (SkyRL's own environments read
their answer there) and `reward_spec.rubrics` as the row's own rubric (shared/row_rubrics.py).
per_turn=False (the default) judges the last reply only, earlier steps returning 0.0;
per_turn=True judges every reply.

SkyRL puts every step's reward into the advantage, so every reward is a number
(shared/sample_rewards.py): a reply the server cannot score because of the reply (empty, too
long) gets on_error, and any other failure (the server unreachable, a rubric that needs a
reference the row lacks, a judge error) raises from step; SkyRL's generator gathers its
trajectories without catching, so the training step stops with the cause.

GEvalEnv subclasses skyrl-gym's BaseTextEnv, so it is made on first use (the module's
__getattr__): the client imports without skyrl-gym.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..transport import read_token
from .shared.diagnostics import SAMPLE_LOG_KEYS, sample_logs
from .shared.row_rubrics import row_rubrics
from .shared.sample_rewards import SampleScorer, reference_text
from .shared.scoring import Sample
from .shared.trainer_text import judge_prompt

ENV_ID = "geval"
ENTRY_POINT = f"{__name__}:GEvalEnv"
SCORER_OPTIONS = ("server", "rubrics", "on_error", "timeout", "mode", "wait_for_server_s", "gate", "gate_reward",
                  "steps")
OPTIONS = (*SCORER_OPTIONS, "token_file", "per_turn", "follow_up")


@dataclass(frozen=True)
class Settings:
    """An environment's options: SampleScorer.configure's (each unset one from the environment
    variables), token_file (the bearer token's file; unset: $GEVAL_REWARD_AUTH_TOKEN), per_turn
    and follow_up (see the module docstring)."""

    scorer: SampleScorer
    per_turn: bool = False
    follow_up: str | None = None

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Settings:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError(f"geval skyrl env: unknown option(s) {unknown}; options are {', '.join(OPTIONS)}")
        token_file = options.get("token_file")
        scorer = SampleScorer.configure(
            **{name: options[name] for name in SCORER_OPTIONS if name in options},
            token=read_token(token_file) if token_file else None,
        )
        follow_up = options.get("follow_up")
        if follow_up is not None and not (isinstance(follow_up, str) and follow_up.strip()):
            raise ValueError(f"geval skyrl env: follow_up must be a message's text, got {follow_up!r}")
        return cls(scorer, bool(options.get("per_turn", False)), follow_up)


def register_geval_env(env_id: str = ENV_ID, **options: Any) -> None:
    """Registers GEvalEnv in skyrl-gym's registry as env_id (the `env_class` rows and
    `environment.env_class` name), every environment made with options (Settings). The options
    are checked here, so a bad one fails at start, not on the first trajectory. skyrl-gym raises
    its RegistrationError when env_id is taken.

    Example, in SkyRL's entrypoint task:
        register_geval_env(server="judge:50051", rubrics="summeval-coherence")"""
    from skyrl_gym.envs import register

    Settings.of(options)
    register(id=env_id, entry_point=ENTRY_POINT, kwargs=dict(options))


class JudgedConversation:
    """GEvalEnv's behaviour, apart from skyrl-gym's BaseTextEnv it is mixed with."""

    def __init__(self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None,
                 **options: Any) -> None:
        """options: register_geval_env's; env_config (SkyRL's `environment.skyrl_gym.<env_class>`,
        where its config takes one) sets the same names over them."""
        super().__init__()
        extras = extras or {}
        self.settings = Settings.of({**options, **(env_config or {})})
        spec = extras.get("reward_spec") or {}
        self.reference = reference_text(spec.get("ground_truth"))
        self.rubrics = row_rubrics(spec.get("rubrics"), "reward_spec['rubrics']")
        self.max_turns = int(extras.get("max_turns") or 1)
        self.follow_ups = self._follow_ups(extras.get("follow_ups"))
        self.turns = 0
        self.conversation: list[dict[str, str]] = []
        self.judged: list[dict[str, float]] = []  # diagnostics.sample_logs of each judged reply

    def _follow_ups(self, row: Sequence[str] | None) -> list[str]:
        """The user message after each reply but the last."""
        needed = self.max_turns - 1
        if row is not None:
            if isinstance(row, str) or len(row) < needed:
                raise ValueError(f"follow_ups: {needed} user messages are needed for max_turns={self.max_turns}, "
                                 f"got {row!r}")
            return list(row[:needed])
        if needed and self.settings.follow_up is None:
            raise ValueError(f"max_turns={self.max_turns}: the user message after each reply comes from the row's "
                             "follow_ups or the env option follow_up, and neither is set")
        return [self.settings.follow_up] * needed

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """The prompt (chat messages) goes to the policy as it is; the judge reads it too."""
        self.conversation = list(prompt)
        return prompt, {}

    def step(self, action: str) -> dict[str, Any]:
        """skyrl-gym's BaseTextEnvStepOutput for the reply `action`."""
        self.turns += 1
        done = self.turns >= self.max_turns
        reward, metadata = 0.0, {}
        if done or self.settings.per_turn:
            sample = Sample(judge_prompt(self.conversation), action, self.reference, self.rubrics,
                            "reward_spec['rubrics']")
            [scored] = self.settings.scorer.rewards([sample])
            reward, metadata = scored.reward, sample_logs(scored)
            self.judged.append(metadata)
        self.conversation.append({"role": "assistant", "content": action})
        observations = [] if done else [{"role": "user", "content": self.follow_ups[self.turns - 1]}]
        self.conversation.extend(observations)
        return {"observations": observations, "reward": reward, "done": done, "metadata": metadata}

    def get_metrics(self) -> dict[str, float]:
        """The episode's judged replies' diagnostics, averaged; SkyRL averages them again over the
        episodes of a step (BaseTextEnv.aggregate_metrics) and logs them as environment/<key>."""
        if not self.judged:
            return {}
        return {f"geval_{key}": sum(logs[key] for logs in self.judged) / len(self.judged) for key in SAMPLE_LOG_KEYS}


def __getattr__(name: str) -> Any:
    """GEvalEnv, made from skyrl-gym's BaseTextEnv when first asked for (ENTRY_POINT is how
    skyrl-gym asks), then kept in the module."""
    if name != "GEvalEnv":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from skyrl_gym.envs.base_text_env import BaseTextEnv

    env = type("GEvalEnv", (JudgedConversation, BaseTextEnv), {
        "__module__": __name__, "__doc__": "skyrl-gym's text environment whose step returns the judge's reward."})
    globals()["GEvalEnv"] = env
    return env
