"""GRPO where every prompt carries its own criteria ("rubrics as rewards").

    geval-reward serve --port 50051 &        # once, in another shell
    python training_examples/grpo_rubric_column.py --server localhost:50051

Each dataset row holds a rubric written for its article in a `criteria` column:
the key points the summary must carry, taken from the article's human-written
highlights. `rubric_column="criteria"` sends each row's rubric with its
completions, in place of a served rubric; the server prepares each distinct
rubric once (the judge writes its evaluation steps, as for a rubric file without
them) and keeps it, so a prompt seen again costs no new preparation.
"""

from __future__ import annotations

from example_setup import cpu_trainer_settings, parse_args, print_log_history, summeval_rows
from geval_client import AsyncGEvalReward


def key_point_rubric(row: int, highlights: str) -> dict:
    """A rubric for one article, with a rubric file's keys: its key points are the criteria."""
    return {
        "name": f"key-points-{row}",
        "criterion": "Key points",
        "task_introduction": "You will be given a news article and a summary of it. Rate the summary on one metric.",
        "evaluation_criteria": (
            "Key points (1-5) - the summary states these points of the article, in its own words, "
            f"and nothing the article does not say: {highlights}"
        ),
        "source_label": "Article",
        "scale": {"min": 1, "max": 5},
    }


def main() -> None:
    args = parse_args(__doc__)
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    rows = summeval_rows(args.prompts, args.article_words)
    for i, row in enumerate(rows):
        row["criteria"] = key_point_rubric(i, row.pop("reference"))
    reward = AsyncGEvalReward(args.server, source_column="article", rubric_column="criteria")
    trainer = GRPOTrainer(
        model=str(args.policy),
        reward_funcs=[reward],
        args=GRPOConfig(**cpu_trainer_settings(args)),
        train_dataset=Dataset.from_list(rows),
    )
    trainer.train()
    print_log_history(trainer.state.log_history)


if __name__ == "__main__":
    main()
