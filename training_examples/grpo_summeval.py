"""GRPO with TRL on SummEval articles, rewarded by the G-Eval server.

    geval-reward serve --port 50051 &        # once, in another shell
    python training_examples/grpo_summeval.py --server localhost:50051

Conversational prompts (chat messages); the judge reads the bare article
(`source_column`) and the human reference (`reference_column`), which also
gives the self-preference diagnostics in the logs.
"""

from __future__ import annotations

from example_setup import cpu_trainer_settings, parse_args, print_log_history, summeval_rows
from geval_client import GEvalReward

RUBRICS = {"summeval-coherence": 1.0, "summeval-relevance": 1.0}


def main() -> None:
    args = parse_args(__doc__)
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_list(summeval_rows(args.prompts, args.article_words))
    reward = GEvalReward(args.server, RUBRICS, source_column="article", reference_column="reference")
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
