"""`geval-reward fit-reward-model`: the reward model's calibrated form fitted on your own
completions, through a running server that serves it (`serve --reward-model PATH`).

Without a reference the reward is sigmoid((raw - center) / scale). A Bradley-Terry model's
raw scores carry an arbitrary offset and spread, so constants that mean something come from
the completions it will score: center is their median raw score, and scale makes the
quartiles' spread map onto 0.25 and 0.75 (scale = (q3 - q1) / (2 ln 3)), a spread robust to
the outliers a few degenerate completions give. The raw score does not depend on the
server's own center and scale, so any running server fits them; restart it with the flags
printed.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import statistics
from collections.abc import Sequence

from .inputs import FORMATS, Columns, parse_rows, read_records

NAME = "reward-model"  # the server's name for its reward-model scorer


class FitError(ValueError):
    """Too few raw scores, or all alike: no spread to fit."""


def fit(raw_scores: Sequence[float]) -> tuple[float, float]:
    """(center, scale): the median raw score, and the quartiles' spread over 2 ln 3."""
    if len(raw_scores) < 4:
        raise FitError(f"{len(raw_scores)} raw scores; the fit needs at least 4 completions")
    q1, median, q3 = statistics.quantiles(raw_scores, n=4, method="inclusive")
    if q3 <= q1:
        raise FitError(f"the quartiles are equal ({q1}): the completions' raw scores have no spread to fit")
    return median, (q3 - q1) / (2 * math.log(3))


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "fit-reward-model", help="fit the reward model's --reward-model-center and --reward-model-scale on your data",
        description="Scores the completions of INPUT with a running server's reward-model scorer and prints the "
                    "center (the median raw score) and scale ((q3 - q1) / (2 ln 3)) to serve with, so your median "
                    "completion gets a reward of 0.5 and the quartiles 0.25 and 0.75.")
    parser.add_argument("input", type=pathlib.Path, help="JSONL, CSV, Parquet file, or a save_to_disk dataset folder")
    parser.add_argument("--server", required=True, help="host:port of a server started with --reward-model")
    parser.add_argument("--auth-token-file", type=pathlib.Path,
                        help="bearer token for a server that requires one (default: $GEVAL_REWARD_AUTH_TOKEN)")
    parser.add_argument("--format", choices=FORMATS, help="default: from the file name")
    parser.add_argument("--split", help="split of a saved DatasetDict")
    parser.add_argument("--prompt-column", default="prompt", help="text, or chat messages (role, content)")
    parser.add_argument("--completion-column", default="completion")
    parser.add_argument("--batch-size", type=int, default=64, help="items per Score call")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per call")


def main(args: argparse.Namespace) -> int:
    from geval_client import RewardClient, RewardModelScore
    from geval_client.transport import read_token

    rows, errors = parse_rows(read_records(args.input, args.format, args.split),
                              Columns(completion=args.completion_column, prompt=args.prompt_column))
    for error in errors:
        print(f"fit-reward-model: skipped {error}")
    raw: list[float] = []
    failed = 0
    with RewardClient(args.server, timeout=args.timeout, token=read_token(args.auth_token_file)) as client:
        for start in range(0, len(rows), args.batch_size):
            batch = rows[start:start + args.batch_size]
            results = client.score([{"prompt": r.prompt, "completion": r.completion} for r in batch],
                                   rubrics={NAME: 1})
            for row, result in zip(batch, results):
                if not result.ok:
                    failed += 1
                    print(f"fit-reward-model: row {row.row} not scored: {result.error.message}")
                    continue
                raw += [s.raw_score for s in result.scores if isinstance(s, RewardModelScore)]
    try:
        center, scale = fit(raw)
    except FitError as error:
        print(f"fit-reward-model: {error}")
        return 2
    print(f"fit-reward-model: {len(raw)} completions ({failed} not scored): median raw score {center:.6g}, "
          f"quartile spread {scale * 2 * math.log(3):.6g}")
    # `=` joins the value: a negative center would otherwise read as a flag of its own
    print(f"--reward-model-center={center:.6g} --reward-model-scale={scale:.6g}")
    return 0
