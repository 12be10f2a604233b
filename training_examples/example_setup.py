"""What the training examples share: the command line, the policy checkpoint,
summarization prompts from SummEval, and trainer settings small enough for a CPU.

The policy is the embedded judge's own checkpoint (SmolLM2-135M-Instruct,
converted by the server's setup), so the examples need no download. SummEval's
articles are cut to their first words so generation and judging stay quick.
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
from collections.abc import Callable
from typing import Any

from geval_audit import datasets
from geval_client.defaults import DEFAULT_TARGET

POLICY = pathlib.Path("~/.cache/geval-reward/models/smollm2-135m-instruct").expanduser()
INSTRUCTION = "Summarize the following news article in one or two sentences."


def parse_args(description: str, extra: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """The shared flags, and an example's own where `extra` adds them."""
    parser = argparse.ArgumentParser(description=description)
    if extra is not None:
        extra(parser)
    parser.add_argument("--server", default=DEFAULT_TARGET,
                        help="reward server HOST:PORT (a comma-separated list spreads calls over several)")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps")
    parser.add_argument("--prompts", type=int, default=8, help="distinct articles to train on")
    parser.add_argument("--article-words", type=int, default=80, help="words of each article kept in the prompt")
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt")
    parser.add_argument("--max-completion-length", type=int, default=32, help="tokens per completion")
    parser.add_argument("--policy", type=pathlib.Path, default=POLICY, help="policy checkpoint (path or hub id)")
    parser.add_argument("--output-dir", default=None, help="checkpoints and logs (default: a temporary folder)")
    return parser.parse_args()


def summeval_rows(prompts: int, article_words: int) -> list[dict[str, Any]]:
    """One row per distinct article: the prompt as chat messages, the cut article, its human reference."""
    rows = []
    for texts in list(datasets.groups(datasets.summeval()).values())[:prompts]:
        article = " ".join(texts[0].source.split()[:article_words])
        rows.append({
            "prompt": [{"role": "user", "content": f"{INSTRUCTION}\n\nArticle: {article}"}],
            "article": article,
            "reference": texts[0].reference,
        })
    return rows


def cpu_trainer_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Settings GRPOConfig and RLOOConfig share; bf16 autocast ran 3x slower on CPU."""
    return dict(
        output_dir=args.output_dir or tempfile.mkdtemp(prefix="geval-example-"),
        use_cpu=True,
        bf16=False,
        max_steps=args.steps,
        per_device_train_batch_size=args.generations,
        num_generations=args.generations,
        max_completion_length=args.max_completion_length,
        learning_rate=1e-5,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
    )


def print_log_history(log_history: list[dict[str, Any]]) -> None:
    """One line per logging step: the trainer's metrics and the reward's diagnostics."""
    for entry in log_history:
        print({key: round(value, 4) for key, value in entry.items() if isinstance(value, float)})
