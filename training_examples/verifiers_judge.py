"""G-Eval rewards in verifiers (0.4): the judge plugin `geval-reward`, plugged in by config.

    geval-reward serve --port 50051 &        # once, in another shell
    pip install verifiers==0.4.0
    python training_examples/verifiers_judge.py --server localhost:50051

In a verifiers run the judge is one option, no task code (vf-eval; prime-rl takes the
same env config):

    vf-eval my-taskset --env.taskset.task.judges '[{"id": "geval-reward", "server": "judge:50051",
        "rubrics": {"summeval-coherence": 1, "summeval-relevance": 1}}]'

This example runs that judge through verifiers' own Task.score without a policy server:
a summarization task per SummEval article (its human summary as the task's `answer`, which
the judge reads as the reference), and as each task's group of rollouts four of the
article's system summaries, scored all at once as verifiers scores rollouts that finish
together (the judge sends them to the server as one Score call). It prints each rollout's
rewards as verifiers records them (two rubrics: each one's share of the weighted reward)
and its advantage against its group's mean, what a GRPO-style trainer takes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

import verifiers.v1 as vf
from example_setup import INSTRUCTION
from geval_audit import datasets
from geval_client.defaults import DEFAULT_TARGET
from verifiers.v1.configs.task import TaskConfig

RUBRICS = {"summeval-coherence": 1.0, "summeval-relevance": 1.0}


class Summary(vf.TaskData):
    answer: str  # the human reference summary


class SummaryTask(vf.Task[Summary, vf.State]):
    """No rewards of its own: the judge plugged in by config scores it."""


def rollout(data: Summary, reply: str) -> vf.Trace:
    """A finished single-turn rollout, as verifiers records one."""
    return vf.Trace(
        task=vf.TraceTask(type=SummaryTask.__name__, data=data), agent=vf.AgentInfo(config=vf.AgentConfig()), ok=True,
        nodes=[vf.MessageNode(message=vf.UserMessage(content=data.prompt)),
               vf.MessageNode(parent=0, message=vf.AssistantMessage(content=reply), sampled=True)],
    )


async def score(args: argparse.Namespace) -> None:
    judges = [{"id": "geval-reward", "server": args.server, "rubrics": RUBRICS}]  # --env.taskset.task.judges
    config = TaskConfig.model_validate({"judges": judges})
    groups = []
    for texts in list(datasets.groups(datasets.summeval()).values())[: args.prompts]:
        article = " ".join(texts[0].source.split()[: args.article_words])
        data = Summary(prompt=f"{INSTRUCTION}\n\nArticle: {article}", answer=texts[0].reference)
        replies = list(dict.fromkeys(t.text for t in texts))[: args.generations]
        groups.append([(SummaryTask(data, config), rollout(data, reply)) for reply in replies])
    # Every rollout scored at once; a judge failure would raise here (verifiers records it on the trace).
    await asyncio.gather(*(task.score(trace) for group in groups for task, trace in group))
    for number, group in enumerate(groups):
        mean = statistics.fmean(trace.reward for _, trace in group)
        print(f"article {number}: group mean reward {mean:.3f}")
        for _, trace in group:
            shares = ", ".join(f"{name} {reward.score:.3f}" for name, reward in trace.rewards.items())
            print(f"  reward {trace.reward:.3f} ({shares}), advantage {trace.reward - mean:+.3f}: "
                  f"{trace.last_reply[:60]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=DEFAULT_TARGET, help="reward server HOST:PORT (a list: a fleet)")
    parser.add_argument("--prompts", type=int, default=2, help="SummEval articles (tasks)")
    parser.add_argument("--generations", type=int, default=4, help="rollouts per task")
    parser.add_argument("--article-words", type=int, default=80, help="words of each article kept in the prompt")
    asyncio.run(score(parser.parse_args()))


if __name__ == "__main__":
    main()
