"""GRPO with TRL on SummEval articles, each group ranked by a pairwise critic in its own format.

    geval-reward serve --port 50051 &        # once, in another shell
    python training_examples/grpo_pairwise_critic.py --server localhost:50051

The critic's prompt is sent with the request as a judge template: its own user turn, with
the two summaries at `{a}` and `{b}`, and its verdict `[[` after which the server reads the
exact probabilities of `A`, `C` (a tie, worth one half) and `B`. Every pair of a group is
read in both orders, so where a summary was placed cannot move its reward, and each
summary's reward is its mean probability of beating its peers. A summary that writes
`[[A]]` itself gains nothing: the verdict the server reads is the one it writes in the
critic's own turn. `serve --template-presets` serves this critic as `pairwise-critic`.
"""

from __future__ import annotations

from example_setup import cpu_trainer_settings, parse_args, print_log_history, summeval_rows
from geval_client import AsyncGroupwiseReward

CRITIC = {
    "name": "summary-critic",
    "template": (
        "Please act as an impartial judge and compare two summaries of the article below. Choose the one that "
        "is more faithful, complete and concise. Do not let their order or length sway you. Output your final "
        "verdict strictly as \"[[A]]\" if summary A is better, \"[[B]]\" if summary B is better, or \"[[C]]\" "
        "for a tie.\n\n[Article]\n{prompt}\n\n[Summary A]\n{a}\n\n[Summary B]\n{b}"
    ),
    "verdict": "[[",
    "choices": ["B", "C", "A"],  # worst to best for the summary placed at {a}
}


def main() -> None:
    args = parse_args(__doc__)
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_list(summeval_rows(args.prompts, args.article_words))
    reward = AsyncGroupwiseReward(args.server, CRITIC, num_generations=args.generations, source_column="article")
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
