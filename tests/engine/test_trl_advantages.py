"""What an unscorable completion does to the advantage, through TRL 1.16's own
reward and advantage code (`_generate_and_score_completions`: `_calculate_rewards`,
the nansum over weighted rewards, the group or leave-one-out baseline) with the
real server, for GRPO and RLOO, with the G-Eval reward alone and beside a second
reward function. Only the policy's sampling is scripted, so that each group holds
an empty completion, which the server refuses because of the completion.

GRPO runs with scale_rewards="none" (Dr. GRPO), so an advantage is the reward
minus its group's mean and the expected values are exact; scaling by the group's
standard deviation does not change which terms make up the numerator."""

from __future__ import annotations

import math
import pathlib

import pytest
from geval_client import GEvalReward

POLICY = pathlib.Path("~/.cache/geval-reward/models/smollm2-135m-instruct").expanduser()
ARTICLE = "The city council voted on Tuesday to build a new public library on the site of the old bus depot."
PROMPT = [
    {"role": "developer", "content": "Summarize the user's text in one sentence."},  # OpenAI-style chat data
    {"role": "user", "content": ARTICLE},
]
TEXTS = [
    "The council voted to build a library on the old bus depot site.",
    "A new public library will replace the old bus depot.",
    "",  # the policy stopped at once: the server cannot score an empty completion
    "Council votes library depot Tuesday.",
]
GENERATIONS = len(TEXTS)
LENGTH_WEIGHT = 0.5
EMPTY = 2  # index of the empty completion in each group


def length_reward(completions, **kwargs):
    """A second, plain reward function, as in training_examples/grpo_reward_weights.py."""
    return [len(c[0]["content"]) / 100 for c in completions]


def score_groups(algorithm, reward_funcs, rows, tmp_path, weights=None):
    """Runs TRL's generate-and-score step for len(rows) groups of the scripted completions;
    returns the advantages, each reward function's rewards as TRL recorded them, and the trainer."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer

    trainer_cls, config_cls, options = {
        "grpo": (GRPOTrainer, GRPOConfig, {"scale_rewards": "none"}),
        "rloo": (RLOOTrainer, RLOOConfig, {}),
    }[algorithm]
    args = config_cls(
        output_dir=str(tmp_path), use_cpu=True, bf16=False, per_device_train_batch_size=GENERATIONS * len(rows),
        num_generations=GENERATIONS, max_completion_length=32, beta=0.0, report_to="none",
        reward_weights=weights, **options,
    )
    dataset = Dataset.from_list(rows)
    trainer = trainer_cls(model=str(POLICY), reward_funcs=reward_funcs, args=args, train_dataset=dataset)
    tokenizer = trainer.processing_class
    scripted = [tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for text in TEXTS]
    completion_ids = scripted * len(rows)
    if algorithm == "grpo":
        trainer._generate_single_turn = lambda *args, **kwargs: (completion_ids, None)
    else:
        trainer._generate_single_turn = lambda *args, **kwargs: completion_ids
    trainer.model.train()
    output = trainer._generate_and_score_completions([row for row in rows for _ in range(GENERATIONS)])
    rewards = {name: list(trainer._logs["rewards"][name]) for name in trainer.reward_func_names}
    return output["advantages"].tolist(), rewards, trainer


def expected_advantage(algorithm, totals, i):
    """GRPO (no scaling): minus the group's mean; RLOO: minus the mean of the others."""
    others = [t for j, t in enumerate(totals) if j != i]
    baseline = sum(totals) / len(totals) if algorithm == "grpo" else sum(others) / len(others)
    return totals[i] - baseline


ROWS = [{"prompt": PROMPT, "reference": "A library will be built on the old bus depot site."}]


@pytest.mark.parametrize("algorithm", ["grpo", "rloo"])
def test_alone_by_default_an_empty_completion_gets_the_lowest_reward_and_advantage(server_address, tmp_path, algorithm):
    reward = GEvalReward(server_address, "summeval-coherence", name="geval_default")
    advantages, rewards, _ = score_groups(algorithm, [reward], ROWS, tmp_path)
    geval = rewards["geval_default"]
    assert geval[EMPTY] == 0.0
    assert all(0.0 < r < 1.0 for i, r in enumerate(geval) if i != EMPTY)  # the developer prompt was scored
    assert advantages[EMPTY] == min(advantages) < 0
    for i in range(GENERATIONS):
        assert advantages[i] == pytest.approx(expected_advantage(algorithm, geval, i), abs=1e-5)
    reward.close()


@pytest.mark.parametrize("algorithm", ["grpo", "rloo"])
def test_alone_excluded_an_empty_completion_gets_no_advantage(server_address, tmp_path, algorithm):
    reward = GEvalReward(server_address, "summeval-coherence", on_error="exclude", name="geval_exclude")
    advantages, rewards, _ = score_groups(algorithm, [reward], ROWS, tmp_path)
    geval = rewards["geval_exclude"]
    peers = [r for i, r in enumerate(geval) if i != EMPTY]
    assert geval[EMPTY] == pytest.approx(sum(peers) / len(peers))
    assert advantages[EMPTY] == pytest.approx(0.0, abs=1e-6)
    reward.close()


@pytest.mark.parametrize("algorithm", ["grpo", "rloo"])
def test_beside_another_reward_excluded_means_the_geval_reward_adds_nothing_to_its_advantage(
    server_address, tmp_path, algorithm
):
    reward = GEvalReward(server_address, "summeval-coherence", on_error="exclude", name="geval_exclude")
    advantages, rewards, _ = score_groups(
        algorithm, [reward, length_reward], ROWS, tmp_path, weights=[1.0, LENGTH_WEIGHT]
    )
    lengths = [LENGTH_WEIGHT * r for r in rewards["length_reward"]]
    # Before: TRL turned None into NaN and nansum counted it as 0, a penalty of the group's mean G-Eval reward.
    assert advantages[EMPTY] == pytest.approx(expected_advantage(algorithm, lengths, EMPTY), abs=1e-5)
    totals = [g + w for g, w in zip(rewards["geval_exclude"], lengths)]
    for i in range(GENERATIONS):
        assert advantages[i] == pytest.approx(expected_advantage(algorithm, totals, i), abs=1e-5)
    reward.close()


@pytest.mark.parametrize("algorithm", ["grpo", "rloo"])
def test_a_failure_from_the_data_is_excluded_for_its_whole_group_and_the_columns_reach_trl(
    server_address, tmp_path, algorithm
):
    """The second prompt has no reference for a rubric that needs one: its completions fail
    for a reason they did not cause, so even the default leaves G-Eval out of that group
    (its empty completion fails for its own reason first, and gets the minimum)."""
    reward = GEvalReward(server_address, "reference-match", reference_column="reference", score_references=False)
    rows = [ROWS[0], {"prompt": PROMPT, "reference": None}]
    advantages, rewards, trainer = score_groups(
        algorithm, [reward, length_reward], rows, tmp_path, weights=[1.0, LENGTH_WEIGHT]
    )
    name = "geval_reference-match"
    assert trainer.reward_func_names == [name, "length_reward"]
    geval, lengths = rewards[name], [LENGTH_WEIGHT * r for r in rewards["length_reward"]]
    assert geval[EMPTY] == 0.0 and not any(math.isnan(r) for r in geval[:GENERATIONS])  # group 1
    assert [math.isnan(r) for r in geval[GENERATIONS:]] == [i != EMPTY for i in range(GENERATIONS)]  # group 2
    assert geval[GENERATIONS + EMPTY] == 0.0
    group2 = lengths[GENERATIONS:]
    for i in range(GENERATIONS):
        assert advantages[GENERATIONS + i] == pytest.approx(expected_advantage(algorithm, group2, i), abs=1e-5)

    extra = trainer._logs["extra"]  # TRL's completions table, filled through log_extra
    assert len(extra[f"{name}/label_mass"]) == 2 * GENERATIONS
    assert extra[f"{name}/label_mass"][EMPTY] is None and 0.0 < extra[f"{name}/label_mass"][0] <= 1.0
    errors = extra[f"{name}/error"]
    assert errors[0] is None and ".completion" in errors[EMPTY] and ".completion" in errors[GENERATIONS + EMPTY]
    assert all(".reference" in errors[GENERATIONS + i] for i in range(GENERATIONS) if i != EMPTY)
    assert list(extra[f"{name}/score_claims_removed"]) == [0] * (2 * GENERATIONS)
    reward.close()
