"""GRPO with TRL on SummEval articles, each group of completions judged within itself.

    geval-reward serve --port 50051 &        # once, in another shell
    python training_examples/grpo_groupwise.py --server localhost:50051

The reward compares the completions of one prompt with each other (ScoreGroups: all
pairs, both orders read, so where a completion was placed cannot move its reward);
GRPO only uses a reward relative to its group, which is what a comparison gives.
The judge reads the bare article (`source_column`).
"""

from __future__ import annotations

from example_setup import cpu_trainer_settings, parse_args, print_log_history, summeval_rows
from geval_client import AsyncGroupwiseReward


def main() -> None:
    args = parse_args(__doc__)
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_list(summeval_rows(args.prompts, args.article_words))
    reward = AsyncGroupwiseReward(args.server, "summeval-coherence", num_generations=args.generations,
                                  source_column="article")
    trainer = GRPOTrainer(
        model=str(args.policy),
        reward_funcs=[reward],
        args=GRPOConfig(**cpu_trainer_settings(args)),
        train_dataset=dataset,
    )
    trainer.train()
    print_log_history(trainer.state.log_history)


if __name__ == "__main__":
    main()
