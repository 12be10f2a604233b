"""AReaL's GRPO on summarization with the G-Eval reward, called by its own RLVR workflow.

    geval-reward serve --port 50051 &        # once, in another shell
    python training_examples/areal_reward.py --server localhost:50051 --dry-run      # CPU: no training
    python -m areal.launcher.local training_examples/areal_reward.py --server localhost:50051 \\
        --config gsm8k_grpo.yaml                                                      # GPU: AReaL trains

AReaL's RLVRWorkflow takes a reward_fn and calls it through AsyncRewardWrapper, in a process
pool, once per sample: make_reward_fn(server, rubrics) is that function. The data set's rows
hold what it reads, as AReaL's own GSM8K set does: "messages" (the prompt, which the workflow
also generates from) and "answer" (here the article's human summary, the judge's reference).

--dry-run needs no GPU and no AReaL engine: SummEval's own system summaries of each article go
through AsyncRewardWrapper as the workflow sends a reply (decoded with its end-of-turn token)
and their rewards are printed. Without it this is AReaL's training script: the launcher runs it
with an AReaL GRPO config (its examples' gsm8k_grpo.yaml with actor.path and the cluster set;
the config's dataset entries still give the batch size, the data comes from here).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from example_setup import summeval_rows
from geval_audit import datasets
from geval_client.defaults import DEFAULT_TARGET
from geval_client.trainers.areal import make_reward_fn

RUBRICS = {"summeval-coherence": 1.0, "summeval-relevance": 1.0}


def parse_args() -> tuple[argparse.Namespace, list[str]]:
    """Our options; the rest (--config and its overrides) is AReaL's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=DEFAULT_TARGET, help="reward server HOST:PORT")
    parser.add_argument("--prompts", type=int, default=8, help="articles to train on")
    parser.add_argument("--article-words", type=int, default=80, help="words of each article kept in the prompt")
    parser.add_argument("--dry-run", action="store_true", help="SummEval's summaries through the reward, no training")
    return parser.parse_known_args()


def areal_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The rows as AReaL's RL data sets hold them: the prompt as "messages", the reference as "answer"."""
    return [{"messages": row["prompt"], "answer": row["reference"]}
            for row in summeval_rows(args.prompts, args.article_words)]


async def dry_run(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    from areal.api.reward_api import AsyncRewardWrapper

    reward = AsyncRewardWrapper(make_reward_fn(args.server, RUBRICS))
    articles = list(datasets.groups(datasets.summeval()).values())[:len(rows)]  # summeval_rows' order
    for i, (row, summaries) in enumerate(zip(rows, articles)):
        # The workflow's call: the prompt as the chat template's text, the reply decoded with its
        # special tokens, the token ids, then the row's fields.
        rewards = await asyncio.gather(*[
            reward(row["messages"][0]["content"], summary.text + "<|im_end|>", [], [], **row) for summary in summaries])
        print({"article": i, "rewards": [round(r, 3) for r in rewards]})


def train(rows: list[dict[str, Any]], server: str, areal_args: list[str]) -> None:
    from areal import PPOTrainer
    from areal.api.cli_args import GRPOConfig, load_expr_config
    from datasets import Dataset

    config, _ = load_expr_config(areal_args, GRPOConfig)
    workflow_kwargs = dict(reward_fn=make_reward_fn(server, RUBRICS), gconfig=config.gconfig,
                           tokenizer=config.tokenizer_path, enable_thinking=False)
    with PPOTrainer(config, train_dataset=Dataset.from_list(rows)) as trainer:
        trainer.train(workflow="areal.workflow.rlvr.RLVRWorkflow", workflow_kwargs=workflow_kwargs)


if __name__ == "__main__":
    options, rest = parse_args()
    if options.dry_run:
        asyncio.run(dry_run(options, areal_rows(options)))
    else:
        train(areal_rows(options), options.server, rest)
