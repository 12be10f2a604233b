"""One real GRPOTrainer step on CPU with the remote reward: the sync and the
async reward functions both reach the server through TRL, and their rewards and
diagnostics land in TRL's logs; and the README's TRL snippet, run as written. Kept
tiny: 2 completions of 8 tokens."""

from __future__ import annotations

import math
import pathlib

from geval_client import AsyncGEvalReward, GEvalReward

from tests.engine.readme_snippets import snippet, with_server

POLICY = pathlib.Path("~/.cache/geval-reward/models/smollm2-135m-instruct").expanduser()
ARTICLE = "The city council voted on Tuesday to build a new public library on the site of the old bus depot."


def test_grpo_trainer_step_with_remote_rewards(server_address, tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_list([{
        "prompt": [{"role": "user", "content": f"Summarize in one sentence: {ARTICLE}"}],
        "article": ARTICLE,
        "reference": "A library will be built on the old bus depot site.",
    }] * 2)
    sync_reward = GEvalReward(server_address, "summeval-coherence", source_column="article",
                              reference_column="reference", name="geval")
    async_reward = AsyncGEvalReward(server_address, "summeval-relevance", source_column="article",
                                    name="geval_async")
    trainer = GRPOTrainer(
        model=str(POLICY),
        reward_funcs=[sync_reward, async_reward],
        args=GRPOConfig(
            output_dir=str(tmp_path), use_cpu=True, bf16=False, max_steps=1, per_device_train_batch_size=2,
            num_generations=2, max_completion_length=8, logging_steps=1, save_strategy="no", report_to="none",
            reward_weights=[1.0, 0.5],
        ),
        train_dataset=dataset,
    )
    trainer.train()
    logs = trainer.state.log_history[0]
    for name in ("geval", "geval_async"):
        # A reward that never arrived would be NaN here (TRL's nanmean over None).
        assert 0.0 <= logs[f"rewards/{name}/mean"] <= 1.0
        assert logs[f"{name}/latency_s"] > 0
        assert 0.0 < logs[f"{name}/label_mass"] <= 1.0
    assert math.isfinite(logs["loss"])
    assert "geval/self_preference_margin" in logs  # the sync reward also scored the reference
    sync_reward.close()


def test_the_readmes_trl_snippet_trains_a_grpo_step(server_address, tmp_path):
    """The README's three lines, run as written with a tiny policy, config and dataset."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    names = {
        "GRPOTrainer": GRPOTrainer,
        "policy": str(POLICY),
        "config": GRPOConfig(
            output_dir=str(tmp_path), use_cpu=True, bf16=False, max_steps=1, per_device_train_batch_size=2,
            num_generations=2, max_completion_length=8, logging_steps=1, save_strategy="no", report_to="none",
        ),
        "dataset": Dataset.from_list([{
            "prompt": [{"role": "user", "content": f"Summarize in one sentence: {ARTICLE}"}],
            "reference": "A library will be built on the old bus depot site.",
        }] * 2),
    }
    exec(with_server(snippet("python", "GRPOTrainer"), server_address), names)
    names["trainer"].train()
    logs = names["trainer"].state.log_history[0]
    name = "geval_summeval-coherence+2*summeval-relevance"
    assert 0.0 <= logs[f"rewards/{name}/mean"] <= 1.0 and 0.0 < logs[f"{name}/label_mass"] <= 1.0
    assert math.isfinite(logs["loss"])


def test_the_process_reward_example_trains_two_grpo_steps(server_address, tmp_path):
    """training_examples/grpo_process_reward.py as a user runs it, on the judge's step rubric
    with a reduction sent per call, kept tiny."""
    import ast
    import subprocess
    import sys

    example = pathlib.Path(__file__).parents[2] / "training_examples" / "grpo_process_reward.py"
    run = subprocess.run(
        [sys.executable, str(example), "--server", server_address, "--steps", "2", "--prompts", "2",
         "--generations", "2", "--max-completion-length", "8", "--step-reduction", "mean",
         "--output-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    logged = [line for line in run.stdout.splitlines() if line.startswith("{")]
    steps = [entry for entry in map(ast.literal_eval, logged) if isinstance(entry.get("rewards/process/mean"), float)]
    assert len(steps) == 2, run.stdout[-2000:]
    assert all(0.0 <= step["rewards/process/mean"] <= 1.0 for step in steps)
    assert all(step["process/steps/step-correctness"] >= 1 for step in steps)
