"""ART (OpenPipe) with the G-Eval reward in RULER's place: summarization, a group of rollouts per article.

    geval-reward serve --port 50051 &        # once, in another shell
    python training_examples/art_ruler_swap.py --server localhost:50051 --dry-run     # CPU: score, no training
    python training_examples/art_ruler_swap.py --server localhost:50051 \\
        --base-model Qwen/Qwen2.5-0.5B-Instruct                                        # GPU: ART's LocalBackend trains

Where ART's own examples rescore each group with
`after_each=lambda group: ruler_score_group(group, "openai/o3", swallow_exceptions=True)`, this
passes geval_client.trainers.art.score_group with the server and rubrics instead: each
trajectory's reward becomes the judge's (its earlier one stays in metrics["independent_reward"]),
and a group the server could not score is left out of the step rather than trained on.
`--groupwise` judges each group within itself (ScoreGroups), as RULER does.

--dry-run needs no GPU, no policy and no ART backend: each article's rollouts are SummEval's own
system summaries of it, scored and printed. (A local transformers policy is no option beside
`import art`: ART patches transformers' masking for the transformers it pins, 5.2, and
generation under newer ones then fails.) Without it, ART's LocalBackend serves --base-model with
vLLM and trains it with Unsloth (ART's `backend` extra; a GPU), as in ART's own training loop.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import art
from example_setup import summeval_rows
from geval_audit import datasets
from geval_client.defaults import DEFAULT_TARGET
from geval_client.trainers.art import score_group
from openai.types.chat.chat_completion import ChatCompletionMessage, Choice

RUBRICS = {"summeval-coherence": 1.0, "summeval-relevance": 1.0}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=DEFAULT_TARGET, help="reward server HOST:PORT")
    parser.add_argument("--steps", type=int, default=2, help="training steps")
    parser.add_argument("--prompts", type=int, default=4, help="articles per step")
    parser.add_argument("--article-words", type=int, default=80, help="words of each article kept in the prompt")
    parser.add_argument("--generations", type=int, default=4, help="rollouts per article (one ART group)")
    parser.add_argument("--max-completion-length", type=int, default=32, help="tokens per reply")
    parser.add_argument("--groupwise", action="store_true", help="judge each group within itself (ScoreGroups)")
    parser.add_argument("--dry-run", action="store_true", help="SummEval's summaries as the rollouts, no training")
    parser.add_argument("--base-model", default="Qwen/Qwen2.5-0.5B-Instruct", help="the model ART trains")
    return parser.parse_args()


def trajectory(row: dict[str, Any], choice: Choice) -> art.Trajectory:
    """A rollout as ART keeps it: the prompt's messages, the model's reply as its Choice, the
    reference in metadata where score_group reads it (reference_key="reference")."""
    return art.Trajectory(messages_and_choices=[*row["prompt"], choice], metadata={"reference": row["reference"]})


def summeval_rollout(rows: list[dict[str, Any]]):
    """--dry-run's rollouts: SummEval's own system summaries of each article (the k-th rollout of
    article i is its k-th summary), so that no policy runs."""
    articles = list(datasets.groups(datasets.summeval()).values())[:len(rows)]  # summeval_rows' order

    async def rollout(i: int, k: int) -> art.Trajectory:
        summaries = articles[i]
        message = ChatCompletionMessage(role="assistant", content=summaries[k % len(summaries)].text)
        return trajectory(rows[i], Choice(index=0, finish_reason="stop", message=message))

    return rollout


async def art_rollout(args: argparse.Namespace, rows: list[dict[str, Any]]):
    """ART's own rollouts: the trained model behind ART's OpenAI-compatible endpoint."""
    from art.local import LocalBackend

    backend = LocalBackend()
    model = art.TrainableModel(name="geval-summarizer", project="geval-art", base_model=args.base_model)
    await model.register(backend)
    client = model.openai_client()

    async def rollout(i: int, k: int) -> art.Trajectory:
        completion = await client.chat.completions.create(
            model=model.get_inference_name(), messages=rows[i]["prompt"], max_tokens=args.max_completion_length)
        return trajectory(rows[i], completion.choices[0])

    return backend, model, rollout


async def main() -> None:
    args = parse_args()
    rows = summeval_rows(args.prompts, args.article_words)
    if args.dry_run:
        backend, model, rollout = None, None, summeval_rollout(rows)
    else:
        backend, model, rollout = await art_rollout(args, rows)

    async def judged(group: art.TrajectoryGroup) -> art.TrajectoryGroup | None:
        return await score_group(group, args.server, RUBRICS, groupwise=args.groupwise, swallow_exceptions=True)

    first = await model.get_step() if model is not None else 0
    for step in range(first, args.steps):
        groups = await art.gather_trajectory_groups(
            (art.TrajectoryGroup(rollout(i, k) for k in range(args.generations)) for i in range(len(rows))),
            after_each=judged, max_exceptions=args.generations * len(rows))
        for group in groups:
            print({"step": step, "rewards": [round(t.reward, 3) for t in group.trajectories],
                   "label_mass": [round(t.metrics["geval_label_mass"], 3) for t in group.trajectories]})
        if model is not None:
            result = await backend.train(model, groups, learning_rate=1e-5)
            print({"step": result.step, **result.metrics})
    if backend is not None:
        await backend.close()


if __name__ == "__main__":
    asyncio.run(main())
