"""When TRL 1.16's `_calculate_rewards` runs two G-Eval rewards against the real
server: it runs sync reward functions one after another and starts the async ones
only afterwards, together. So a sync G-Eval reward holds an async one back for the
whole of its RPC, and two AsyncGEvalRewards score at the same time. Each reward
records when its call started and ended; the assertions are about order, not speed."""

from __future__ import annotations

import pathlib
import time

from geval_client import AsyncGEvalReward, GEvalReward

POLICY = pathlib.Path("~/.cache/geval-reward/models/smollm2-135m-instruct").expanduser()
ARTICLE = "The city council voted on Tuesday to build a new public library on the site of the old bus depot."
SUMMARIES = [
    "The council voted to build a library on the old bus depot site.",
    "A new public library will replace the old bus depot.",
    "Council votes library depot Tuesday.",
    "The bus depot closes; a library is planned there by the council.",
]


class TimedSync(GEvalReward):
    def __call__(self, *args, **kwargs):
        started = time.monotonic()
        rewards = super().__call__(*args, **kwargs)
        self.span = (started, time.monotonic())
        return rewards


class TimedAsync(AsyncGEvalReward):
    async def __call__(self, *args, **kwargs):
        started = time.monotonic()
        rewards = await super().__call__(*args, **kwargs)
        self.span = (started, time.monotonic())
        return rewards


def calculate_rewards(reward_funcs, tmp_path):
    """TRL's own _calculate_rewards on one group of fixed completions; returns the trainer."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    rows = [{"prompt": [{"role": "user", "content": f"Summarize: {ARTICLE}"}], "article": ARTICLE}]
    args = GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, bf16=False, per_device_train_batch_size=len(SUMMARIES),
        num_generations=len(SUMMARIES), max_completion_length=16, beta=0.0, report_to="none",
    )
    dataset = Dataset.from_list(rows)
    trainer = GRPOTrainer(model=str(POLICY), reward_funcs=reward_funcs, args=args, train_dataset=dataset)
    inputs = rows * len(SUMMARIES)
    completions = [[{"role": "assistant", "content": s}] for s in SUMMARIES]
    rewards = trainer._calculate_rewards(inputs, [r["prompt"] for r in inputs], completions, [[1]] * len(SUMMARIES))
    assert rewards.shape == (len(SUMMARIES), len(reward_funcs)) and not rewards.isnan().any()
    return trainer


def test_trl_starts_an_async_reward_only_after_a_sync_one_has_finished(server_address, tmp_path):
    sync = TimedSync(server_address, "summeval-coherence", source_column="article")
    later = TimedAsync(server_address, "summeval-relevance", source_column="article")
    calculate_rewards([later, sync], tmp_path)  # listed first, still started last
    assert later.span[0] >= sync.span[1]
    sync.close()


def test_two_async_geval_rewards_score_at_the_same_time_under_their_own_names(server_address, tmp_path):
    coherence = TimedAsync(server_address, "summeval-coherence", source_column="article")
    relevance = TimedAsync(server_address, "summeval-relevance", source_column="article")
    trainer = calculate_rewards([coherence, relevance], tmp_path)
    assert max(coherence.span[0], relevance.span[0]) < min(coherence.span[1], relevance.span[1])
    assert trainer.reward_func_names == ["geval_summeval-coherence", "geval_summeval-relevance"]
