"""RLOO with TRL on SummEval articles, rewarded by the G-Eval server.

    geval-reward serve --port 50051 &        # once, in another shell
    python training_examples/rloo_summeval.py --server localhost:50051

Standard-format prompts: plain text, here the chat prompt rendered with the
policy's chat template (an instruct model given bare text often answers with an
end-of-turn at once, an empty completion that gets no reward). RLOO's baseline for each completion is the mean
reward of the other completions of its prompt, so it needs no value model:
with a remote judge it is the closest TRL 1.16 trainer to PPO.
"""

from __future__ import annotations

from example_setup import cpu_trainer_settings, parse_args, print_log_history, summeval_rows
from geval_client import GEvalReward

RUBRICS = {"summeval-coherence": 1.0, "summeval-relevance": 1.0}


def main() -> None:
    args = parse_args(__doc__)
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import RLOOConfig, RLOOTrainer

    tokenizer = AutoTokenizer.from_pretrained(args.policy)
    rows = summeval_rows(args.prompts, args.article_words)
    for row in rows:
        row["prompt"] = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
    dataset = Dataset.from_list(rows)
    reward = GEvalReward(args.server, RUBRICS, source_column="article", reference_column="reference")
    trainer = RLOOTrainer(
        model=str(args.policy),
        reward_funcs=[reward],
        args=RLOOConfig(**cpu_trainer_settings(args)),
        train_dataset=dataset,
    )
    trainer.train()
    print_log_history(trainer.state.log_history)


if __name__ == "__main__":
    main()
