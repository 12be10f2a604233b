"""The reward model as a kind (scorers/kind.py): `serve --reward-model PATH` and its flags,
the classifier's own vLLM engine started beside the judge's (or alone, `--no-judge`), and its
scorer `reward-model` checked with a probe item before the server is ready."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass

from geval_server.engine.defaults import REWARD_MODEL_MEMORY_FRACTION
from geval_server.scorers.kind import ScorerKind, Served, StartContext
from geval_server.scorers.own_engine import memory_fraction, probe, start_engine
from geval_server.scorers.reward_model.checkpoint import FLAG
from geval_server.scorers.reward_model.groups import RewardModelComparer
from geval_server.scorers.reward_model.scorer import KIND, NAME, Calibration, RewardModelScorer

log = logging.getLogger(__name__)

MEMORY_FLAG = "--reward-model-memory-fraction"


@dataclass(frozen=True)
class RewardModelConfig:
    """serve --reward-model PATH and its flags."""

    path: str
    head: str | None = None  # the output the reward is made from; None: the first
    center: float = 0.0
    scale: float = 1.0
    memory_fraction: float = REWARD_MODEL_MEMORY_FRACTION  # its share of a GPU shared with the judge


class RewardModelKind(ScorerKind):
    name = KIND

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        reward = parser.add_argument_group(
            "reward-model", "A trained reward model (a sequence classifier) served as rubric 'reward-model', in a "
            "second vLLM engine beside the judge (docs/scorers/reward-model.md).")
        reward.add_argument(FLAG, metavar="PATH",
                            help="a *ForSequenceClassification checkpoint (Skywork-Reward, ArmoRM, ...) to serve as "
                                 "'reward-model'; its own chat template renders each (prompt, completion)")
        reward.add_argument("--reward-model-head", metavar="NAME",
                            help="the output (id2label name) the reward is made from, for a model with several "
                                 "(unset: the first); every output is reported")
        reward.add_argument("--reward-model-center", type=float, default=RewardModelConfig.center,
                            help="without a reference, reward = sigmoid((raw - center) / scale); fit both on your "
                                 "completions with `geval-reward fit-reward-model`")
        reward.add_argument("--reward-model-scale", type=float, default=RewardModelConfig.scale,
                            help="see --reward-model-center")
        reward.add_argument(MEMORY_FLAG, type=float, default=RewardModelConfig.memory_fraction,
                            help="on a GPU, the reward model's share of the memory the judge would have had "
                                 "(--gpu-memory-utilization); the judge keeps the rest. On CPU the reward model gets "
                                 "a 1 GiB KV cache beside the judge's")

    def settings(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> RewardModelConfig | None:
        if args.reward_model is None:
            return None
        if args.reward_model_scale <= 0:
            parser.error(f"--reward-model-scale: must be positive, got {args.reward_model_scale}")
        return RewardModelConfig(args.reward_model, args.reward_model_head, args.reward_model_center,
                                 args.reward_model_scale,
                                 memory_fraction(parser, MEMORY_FLAG, args.reward_model_memory_fraction))

    def engine_share(self, settings: RewardModelConfig) -> tuple[str, float]:
        return MEMORY_FLAG, settings.memory_fraction

    async def start(self, settings: RewardModelConfig, context: StartContext) -> Served:
        """Checks the checkpoint, starts the classifier's engine and serves `reward-model` after a
        probe item; a model vLLM refuses, or one that cannot score, fails here (SystemExit naming
        --reward-model) and its engine is shut down."""
        from transformers import AutoTokenizer

        from geval_server.engine.tokenization import JudgeTokenizerError, Tokenization
        from geval_server.scorers.reward_model.chat import ChatRenderer
        from geval_server.scorers.reward_model.checkpoint import RewardModelError, read_checkpoint

        config = context.config
        trust = bool(config.engine_args.get("trust_remote_code"))
        try:
            checkpoint = read_checkpoint(settings.path, settings.head, trust)
        except RewardModelError as error:
            raise SystemExit(f"geval-reward: {error}") from error
        own_args = context.engine_args[MEMORY_FLAG]
        classifier = context.make_classifier(checkpoint.path, own_args)
        path = checkpoint.path
        try:
            chat = ChatRenderer(Tokenization(AutoTokenizer.from_pretrained(path, trust_remote_code=trust)))
        except (JudgeTokenizerError, RewardModelError) as error:
            raise SystemExit(f"geval-reward: {FLAG} {path}: {error}") from error
        start_engine(classifier, FLAG, path, "a classifier")
        scorer = RewardModelScorer(classifier, checkpoint, chat, Calibration(settings.center, settings.scale),
                                   RewardModelComparer())
        await probe(context, scorer, classifier, FLAG, path)
        log.info("serving reward model %s as %r (head %r of %s)", path, scorer.name,
                 checkpoint.heads[checkpoint.head], list(checkpoint.heads))
        return Served([scorer], engines=[classifier], default=NAME)
