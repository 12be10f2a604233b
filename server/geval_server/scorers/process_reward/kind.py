"""Process rewards as a kind (scorers/kind.py): `serve --process-reward-model PATH --step-tag
TOKEN` and its flags, the PRM's own vLLM pooling engine started beside the judge's (or alone,
`--no-judge`), and its scorer `process-reward-model` checked with a probe item before the
server is ready."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass

from geval_server.engine.defaults import REWARD_MODEL_MEMORY_FRACTION
from geval_server.scorers.base import STEP_REDUCTIONS
from geval_server.scorers.kind import ScorerKind, Served, StartContext
from geval_server.scorers.own_engine import memory_fraction, probe, start_engine
from geval_server.scorers.process_reward.checkpoint import FLAG
from geval_server.scorers.process_reward.scorer import KIND, NAME, ProcessRewardScorer

log = logging.getLogger(__name__)

MEMORY_FLAG = "--process-reward-model-memory-fraction"

DEFAULT_TAG = "<extra_0>"  # Qwen2.5-Math-PRM's step tag


@dataclass(frozen=True)
class ProcessRewardConfig:
    """serve --process-reward-model PATH and its flags."""

    path: str
    step_tag: str = DEFAULT_TAG
    reduction: str = "min"
    memory_fraction: float = REWARD_MODEL_MEMORY_FRACTION  # its share of a GPU shared with the judge


class ProcessRewardKind(ScorerKind):
    name = KIND

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group(
            "process-reward", "A trained process reward model served as rubric 'process-reward-model': a score per "
            "reasoning step, in its own vLLM engine beside the judge (docs/scorers/process-rewards.md).")
        group.add_argument(FLAG, metavar="PATH",
                           help="a process reward model (Qwen2ForProcessRewardModel, as Qwen2.5-Math-PRM) to serve "
                                "as 'process-reward-model'; its own chat template renders each (prompt, steps)")
        group.add_argument("--step-tag", metavar="TOKEN", default=ProcessRewardConfig.step_tag,
                           help="the token written after each step, where the PRM reads the step's score; one token "
                                "of its vocabulary")
        group.add_argument("--step-reduction", choices=STEP_REDUCTIONS, default=ProcessRewardConfig.reduction,
                           help="how the step scores make the reward where a request names none")
        group.add_argument(MEMORY_FLAG, type=float,
                           default=ProcessRewardConfig.memory_fraction,
                           help="on a GPU, the PRM's share of the memory the judge would have had; on CPU it gets a "
                                "1 GiB KV cache beside the judge's")

    def settings(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> ProcessRewardConfig | None:
        if args.process_reward_model is None:
            return None
        fraction = memory_fraction(parser, MEMORY_FLAG, args.process_reward_model_memory_fraction)
        if not args.step_tag:
            parser.error("--step-tag: must not be empty")
        return ProcessRewardConfig(args.process_reward_model, args.step_tag, args.step_reduction, fraction)

    def engine_share(self, settings: ProcessRewardConfig) -> tuple[str, float]:
        return MEMORY_FLAG, settings.memory_fraction

    async def start(self, settings: ProcessRewardConfig, context: StartContext) -> Served:
        """Checks the checkpoint and the tag, starts the PRM's engine and serves
        `process-reward-model` after a probe item; a model vLLM refuses, or one that cannot
        score, fails here (SystemExit naming the flag) and its engine is shut down."""
        from transformers import AutoTokenizer

        from geval_server.engine.tokenization import JudgeTokenizerError, Tokenization
        from geval_server.engine.vllm_process_reward import VllmStepScorer
        from geval_server.scorers.process_reward.chat import StepChatRenderer
        from geval_server.scorers.process_reward.checkpoint import ProcessRewardError, read_checkpoint

        config = context.config
        trust = bool(config.engine_args.get("trust_remote_code"))
        path = settings.path
        try:
            checkpoint = read_checkpoint(path, trust)
            chat = StepChatRenderer(Tokenization(AutoTokenizer.from_pretrained(path, trust_remote_code=trust)),
                                    settings.step_tag)
        except JudgeTokenizerError as error:
            raise SystemExit(f"geval-reward: {FLAG} {path}: {error}") from error
        except ProcessRewardError as error:
            raise SystemExit(f"geval-reward: {error}") from error
        engine = VllmStepScorer(path, context.engine_args[MEMORY_FLAG])
        start_engine(engine, FLAG, path, "a process reward model")
        scorer = ProcessRewardScorer(engine, checkpoint, chat, settings.reduction)
        await probe(context, scorer, engine, FLAG, path)
        log.info("serving process reward model %s as %r (step tag %r, reduction %s)", path, NAME,
                 settings.step_tag, settings.reduction)
        return Served([scorer], engines=[engine], default=NAME)
