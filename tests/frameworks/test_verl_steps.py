"""A process reward on tokens through veRL 0.7.0's own code, from its wheel: the config composed
by Hydra from its ppo_trainer.yaml with the overrides docs/trainers/verl.md gives for
StepRewardManager, then the two calls the trainer makes (main_ppo's load_reward_manager with
reward_model.reward_kwargs, ray_trainer's compute_reward) on a DataProto as the trainer builds
it, responses encoded by a real byte-level tokenizer. Each step's score must land on the token
that ends its step, and a failed sample's on_error on its last token."""

from __future__ import annotations

import json
import re

import pytest

from tests.frameworks.conftest import installed, run_with
from tests.frameworks.test_verl import VERL_IMPORTS
from tests.frameworks.test_verl_reward_loop import docs_overrides
from tests.unit.fakes import SpaceDigitTokenizer, serve_in_process
from tests.unit.test_step_rewards_in_trainers import StepJudge

SCRIPT = r"""
import json, os, pathlib, shlex
import numpy as np, torch
from hydra import compose, initialize_config_dir
import verl
from verl import DataProto
from verl.trainer.ppo.reward import compute_reward, load_reward_manager
from tests.unit.fakes import SpaceDigitTokenizer

tokenizer = SpaceDigitTokenizer()
texts = json.loads(os.environ["TEXTS"])
ids = [tokenizer.encode(text) for text in texts]
width = max(len(row) for row in ids)
n, prompt = len(texts), 2
responses = torch.tensor([row + [0] * (width - len(row)) for row in ids])
mask = torch.tensor([[1] * prompt + [1] * len(row) + [0] * (width - len(row)) for row in ids])
batch = DataProto.from_dict(
    tensors={"prompts": torch.ones(n, prompt, dtype=torch.long), "responses": responses, "attention_mask": mask},
    non_tensors={"data_source": np.array(["d"] * n, dtype=object),
                 "reward_model": np.array([{"ground_truth": "R"}] * n, dtype=object),
                 "extra_info": np.array([{"prompt": "Solve."}] * n, dtype=object)})

with initialize_config_dir(config_dir=str(pathlib.Path(verl.__file__).parent / "trainer/config"), version_base=None):
    config = compose("ppo_trainer", overrides=shlex.split(os.environ["OVERRIDES"]))
# as main_ppo.py makes it, and as ray_trainer.py reads it
reward_fn = load_reward_manager(config, tokenizer, num_examine=0, **config.reward_model.get("reward_kwargs", {}))
tensor, extra = compute_reward(batch, reward_fn)
print(json.dumps({"rows": [{str(t): v for t, v in enumerate(row) if v} for row in tensor.tolist()],
                  "extra": {k: list(map(float, v)) for k, v in extra.items()}}))
"""

TEXTS = ["Tom has 3 apples.\n\nHe buys 4 at the café\n\nThe answer is 3 + 4 = 7.", "All at once: 7.", ""]


@pytest.fixture(scope="module")
def judge():
    yield from serve_in_process(StepJudge())


@pytest.fixture(scope="module")
def placed(judge) -> dict:
    command = docs_overrides("reward_manager.name=StepRewardManager")
    command = command.replace("python -m verl.trainer.main_ppo ...", "").replace("\\\n", " ")
    overrides = command.replace("localhost:50051", judge.address) + " actor_rollout_ref.model.path=stand-in"
    paths = [installed("verl", "0.7.0"), *(installed(p, v) for p, v in VERL_IMPORTS)]
    out = run_with(paths, SCRIPT, timeout=300, env={"TEXTS": json.dumps(TEXTS), "OVERRIDES": overrides})
    return json.loads(out.strip().splitlines()[-1])


def _step_end_tokens(text: str) -> list[int]:
    """Where each blank-line step ends, in tokens: the tokenizer's tokens of the text up to the
    step's last character (this tokenizer merges only a space and a digit, never across a step's end)."""
    tokenizer = SpaceDigitTokenizer()
    ends = [m.start() for m in re.finditer(r"\n\n", text)] + [len(text)]
    return [len(tokenizer.encode(text[:end])) - 1 for end in ends]


def test_verl_places_each_step_score_on_the_token_that_ends_its_step(placed):
    rows = [{int(t): v for t, v in row.items()} for row in placed["rows"]]
    # the second step ends in "é", two byte-level tokens: its score goes on the second
    assert rows[0] == pytest.approx(dict(zip(_step_end_tokens(TEXTS[0]), [0.9, 0.7, 0.5])))
    assert rows[1] == pytest.approx({len(SpaceDigitTokenizer().encode(TEXTS[1])) - 1: 0.9})
    assert rows[2] == {}  # the empty response failed: on_error's 0.0


def test_verl_logs_the_reduced_reward_and_the_number_of_steps(placed):
    assert placed["extra"]["score"] == pytest.approx([0.5, 0.9, 0.0])
    assert placed["extra"]["steps"] == [3.0, 1.0, 0.0] and placed["extra"]["failed"] == [0.0, 0.0, 1.0]
