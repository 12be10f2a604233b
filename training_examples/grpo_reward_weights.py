"""GRPO combining the G-Eval reward with a length reward through `reward_weights`.

    geval-reward serve --port 50051 &        # once, in another shell
    python training_examples/grpo_reward_weights.py --server localhost:50051

TRL scores each completion with every reward function, logs each under its
name (`rewards/geval/mean`, `rewards/length_near_target/mean`) and trains on
their weighted sum. The G-Eval reward is the async variant, as in any TRL
trainer: TRL runs the sync reward functions one after another first (the length
reward is instant), then all async ones together on its event loop.
"""

from __future__ import annotations

from example_setup import cpu_trainer_settings, parse_args, print_log_history, summeval_rows
from geval_client import AsyncGEvalReward
from geval_client.trainer_text import completion_text

RUBRICS = {"summeval-coherence": 2.0, "summeval-relevance": 1.0}
TARGET_WORDS = 25
WEIGHTS = [1.0, 0.5]  # G-Eval, length


def length_near_target(completions, **_) -> list[float]:
    """1 at TARGET_WORDS words, falling linearly to 0 at none or twice as many."""
    words = [len(completion_text(c).split()) for c in completions]
    return [max(0.0, 1.0 - abs(n - TARGET_WORDS) / TARGET_WORDS) for n in words]


def main() -> None:
    args = parse_args(__doc__)
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_list(summeval_rows(args.prompts, args.article_words))
    geval = AsyncGEvalReward(args.server, RUBRICS, source_column="article", name="geval")
    trainer = GRPOTrainer(
        model=str(args.policy),
        reward_funcs=[geval, length_near_target],
        args=GRPOConfig(**cpu_trainer_settings(args), reward_weights=WEIGHTS),
        train_dataset=dataset,
    )
    trainer.train()
    print_log_history(trainer.state.log_history)


if __name__ == "__main__":
    main()
