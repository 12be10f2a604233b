"""GRPO on a process reward: each completion's reasoning steps scored one by one.

    geval-reward serve --port 50051 &        # once, in another shell: the judge's step-correctness
    python training_examples/grpo_process_reward.py --server localhost:50051 [--step-reduction mean]
    # with a trained PRM beside the judge:
    #   geval-reward serve --port 50051 --process-reward-model PATH --step-tag '<extra_0>'
    #   python training_examples/grpo_process_reward.py --rubric process-reward-model

The policy is asked to solve small word problems one step per paragraph; the server splits each
completion on blank lines, scores every step (the judge's `step-correctness` rubric, or a
trained PRM's P(good) at each step's tag) and returns their reduction as the reward: the one
`--step-reduction` names here (sent with every call as `steps=`), else the server's default
(the minimum). TRL logs the reward, the mean score of each
step position (`step_score/<rubric>/<k>`), the mean number of steps, and each completion's step
scores in its completions table.
"""

from __future__ import annotations

import random

from example_setup import cpu_trainer_settings, parse_args, print_log_history
from geval_client import GEvalReward

INSTRUCTION = "Solve the problem. Write one step per paragraph, then the answer."


def problems(count: int) -> list[dict]:
    """Two-step arithmetic word problems, seeded, as conversational prompts."""
    rng = random.Random(0)
    rows = []
    for _ in range(count):
        a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(2, 5)
        text = f"Ann has {a} boxes with {b} pens each. She gives away {c} pens. How many pens does she have left?"
        rows.append({"prompt": [{"role": "user", "content": f"{INSTRUCTION}\n\n{text}"}]})
    return rows


def main() -> None:
    def add_flags(parser) -> None:
        parser.add_argument("--rubric", default="step-correctness",
                            help="the process reward: step-correctness or process-reward-model")
        parser.add_argument("--step-reduction", choices=("min", "mean", "last", "product"),
                            help="how the step scores make the reward (default: the server's)")

    args = parse_args(__doc__, add_flags)
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    steps = {"reduction": args.step_reduction} if args.step_reduction else None
    reward = GEvalReward(args.server, {args.rubric: 1.0}, name="process", steps=steps)
    trainer = GRPOTrainer(
        model=str(args.policy),
        reward_funcs=[reward],
        args=GRPOConfig(**cpu_trainer_settings(args)),
        train_dataset=Dataset.from_list(problems(args.prompts)),
    )
    trainer.train()
    print_log_history(trainer.state.log_history)


if __name__ == "__main__":
    main()
