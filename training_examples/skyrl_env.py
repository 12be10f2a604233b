"""SkyRL (skyrl-train) on SummEval articles, each trajectory's reward from the G-Eval server
through the skyrl-gym environment `geval` (geval_client.trainers.skyrl).

    geval-reward serve --port 50051 &        # once, in another shell
    python training_examples/skyrl_env.py --server judge:50051 --data-dir ~/data/geval-skyrl \
        trainer.policy.model.path=Qwen/Qwen2.5-0.5B-Instruct trainer.placement.policy_num_gpus_per_node=1

Writes the data set as SkyRL reads it (parquet: `prompt` as chat messages, `env_class`, the
reference as `reward_spec.ground_truth`, and `follow_ups` for the user's later turns), then
runs SkyRL's PPO entrypoint with the environment registered inside its Ray task, as SkyRL's own
examples register theirs. `--turns 2` makes each episode two replies (generator.max_turns),
judged at the end; `--per-turn` judges each reply. Arguments after the options are SkyRL's
config overrides (`key=value`). SkyRL needs a GPU with vLLM: this machine runs `--prepare-only`.
"""

from __future__ import annotations

import argparse
import pathlib

from example_setup import summeval_rows
from geval_client.defaults import DEFAULT_TARGET
from geval_client.trainers.skyrl import ENV_ID, register_geval_env

RUBRICS = {"summeval-coherence": 1.0, "summeval-relevance": 1.0}
FOLLOW_UP = "Now say it again in at most fifteen words."


def parse_args() -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=DEFAULT_TARGET, help="reward server HOST:PORT, as SkyRL's workers reach it")
    parser.add_argument("--data-dir", type=pathlib.Path, default=pathlib.Path("~/data/geval-skyrl").expanduser())
    parser.add_argument("--prompts", type=int, default=64, help="distinct articles (the last 8 are for validation)")
    parser.add_argument("--article-words", type=int, default=200, help="words of each article kept in the prompt")
    parser.add_argument("--turns", type=int, default=1, help="replies per episode (generator.max_turns)")
    parser.add_argument("--per-turn", action="store_true", help="judge every reply, not only the last")
    parser.add_argument("--prepare-only", action="store_true", help="write the data set and stop")
    return parser.parse_known_args()


def write_data(args: argparse.Namespace) -> tuple[pathlib.Path, pathlib.Path]:
    """train.parquet and validation.parquet, one row per article, in SkyRL's PromptDataset layout."""
    import pandas as pd

    rows = [{
        "prompt": row["prompt"],
        "env_class": ENV_ID,
        "reward_spec": {"ground_truth": row["reference"]},
        "follow_ups": [FOLLOW_UP] * (args.turns - 1),
    } for row in summeval_rows(args.prompts, args.article_words)]
    args.data_dir.mkdir(parents=True, exist_ok=True)
    train, validation = args.data_dir / "train.parquet", args.data_dir / "validation.parquet"
    pd.DataFrame(rows[:-8]).to_parquet(train)
    pd.DataFrame(rows[-8:]).to_parquet(validation)
    return train, validation


def train(args: argparse.Namespace, overrides: list[str], train_file: pathlib.Path, validation: pathlib.Path) -> None:
    import ray
    from skyrl.train.config import SkyRLTrainConfig
    from skyrl.train.entrypoints.main_base import BasePPOExp
    from skyrl.train.utils import initialize_ray, validate_cfg

    @ray.remote(num_cpus=1)
    def skyrl_entrypoint(cfg, server: str, per_turn: bool) -> None:
        # skyrl-gym's registry belongs to a process: register where the trainer runs.
        register_geval_env(server=server, rubrics=RUBRICS, per_turn=per_turn)
        BasePPOExp(cfg).run()

    cfg = SkyRLTrainConfig.from_cli_overrides([
        f"data.train_data=['{train_file}']", f"data.val_data=['{validation}']",
        f"environment.env_class={ENV_ID}", f"generator.max_turns={args.turns}", *overrides,
    ])
    validate_cfg(cfg)
    initialize_ray(cfg)
    ray.get(skyrl_entrypoint.remote(cfg, args.server, args.per_turn))


def main() -> None:
    args, overrides = parse_args()
    train_file, validation = write_data(args)
    print(f"wrote {train_file} and {validation}")
    if not args.prepare_only:
        train(args, overrides, train_file, validation)


if __name__ == "__main__":
    main()
