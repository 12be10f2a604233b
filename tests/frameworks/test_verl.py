"""veRL's own reward managers, from its wheel, calling the geval_client.verl forms as veRL loads
them (get_custom_reward_fn with reward_kwargs, path pkg://geval_client.verl), at the oldest and
newest veRL the docs name. The legacy managers (verl/workers/reward_manager/: naive, batch,
prime) are driven with a DataProto as the trainer builds it; a stand-in tokenizer decodes each
response to its sample's text. prime calls the reward in a process pool and turns any
Exception into 0.0: a failure, compute_score's dict and compute_score_async must each stop
the step with ScoringAborted naming the cause or the form to use."""

from __future__ import annotations

import json

import pytest

from tests.frameworks.conftest import installed, run_with
from tests.unit.fakes import serve_in_process
from tests.unit.test_framework_adapters import ScriptedJudge

# veRL's imports the test environment lacks (torch and transformers are in it), and Ray,
# which veRL imports at the top of its package.
VERL_IMPORTS = [("tensordict", "0.10.0"), ("pyvers", "0.1.0"), ("omegaconf", "2.3.0"), ("hydra-core", "1.3.2"),
                ("antlr4-python3-runtime", "4.9.3"), ("codetiming", "1.4.0"), ("orjson", "3.11.3"),
                ("ray", "2.60.0"), ("msgpack", "1.1.1")]

MANAGERS = r"""
import json, os, sys
import numpy as np, torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.workers.reward_manager.batch import BatchRewardManager
from verl.workers.reward_manager.naive import NaiveRewardManager
from verl.workers.reward_manager.prime import PrimeRewardManager

class Tokenizer:  # response token 0 holds the sample's index
    def __init__(self, texts):
        self.texts = texts
    def batch_decode(self, ids, skip_special_tokens=True):
        return [self.texts[int(row[0])] for row in ids]
    def decode(self, ids, skip_special_tokens=True):
        return self.texts[int(ids[0])]

def batch(texts, references):
    n, prompt, response = len(texts), 2, 3
    responses = torch.tensor([[i, 1, 1] for i in range(n)])
    return DataProto.from_dict(
        tensors={"prompts": torch.ones(n, prompt, dtype=torch.long), "responses": responses,
                 "attention_mask": torch.ones(n, prompt + response, dtype=torch.long)},
        non_tensors={"data_source": np.array(["d"] * n, dtype=object),
                     "reward_model": np.array([{"ground_truth": r} for r in references], dtype=object),
                     "extra_info": np.array([{"prompt": "Summarize."} for _ in texts], dtype=object)})

def reward_fn(name):
    function = {"path": "pkg://geval_client.verl", "name": name,
                "reward_kwargs": {"server": os.environ["JUDGE"], "rubrics": "a"}}
    # 0.7 reads the top-level key, 0.8 on reward.custom_reward_function
    return get_custom_reward_fn(OmegaConf.create({"custom_reward_function": function,
                                                  "reward": {"custom_reward_function": function}}))

manager_class = {"naive": NaiveRewardManager, "batch": BatchRewardManager, "prime": PrimeRewardManager}
outcomes = []
for manager, form, texts, references in json.loads(os.environ["CASES"]):
    managed = manager_class[manager](Tokenizer(texts), 0, reward_fn(form))
    try:
        outcomes.append({"rewards": managed(batch(texts, references)).sum(-1).tolist()})
    except BaseException as error:
        outcomes.append({"error": type(error).__name__, "message": str(error)})
print(json.dumps(outcomes))
"""


VERSIONS = ["0.7.0", "0.9.1"]
SCORED = ["Ten chars!", "", "Twelve chars"]  # "" fails for its own reason: on_error "min", 0.0
CASES = {
    "naive": ("naive", "compute_score", SCORED, ["R"] * 3),
    "batch": ("batch", "compute_score_batch", SCORED, ["R"] * 3),
    "prime": ("prime", "compute_score_prime", SCORED, ["R"] * 3),
    "prime, a failure": ("prime", "compute_score_prime", ["Ten chars!", "Fine."], ["R", "MISSING"]),
    "prime, the dict form": ("prime", "compute_score", ["Ten chars!"], ["R"]),
    "prime, the async form": ("prime", "compute_score_async", ["Ten chars!"], ["R"]),
}


@pytest.fixture(scope="module")
def judge():
    yield from serve_in_process(ScriptedJudge())


@pytest.fixture(scope="module", params=VERSIONS)
def outcomes(request, judge) -> dict:
    """Every case through one veRL version, in one interpreter (importing veRL takes seconds)."""
    paths = [installed("verl", request.param)] + [installed(name, v) for name, v in VERL_IMPORTS]
    cases = json.dumps(list(CASES.values()))
    out = run_with(paths, MANAGERS, timeout=300, env={"JUDGE": judge.address, "CASES": cases})
    return dict(zip(CASES, json.loads(out.strip().splitlines()[-1])))


@pytest.mark.parametrize("case", ["naive", "batch", "prime"])
def test_verl_managers_take_the_rewards(outcomes, case):
    assert outcomes[case]["rewards"] == pytest.approx([0.1, 0.0, 0.12]), outcomes[case]


def test_verl_prime_stops_on_a_failure_instead_of_zero(outcomes):
    result = outcomes["prime, a failure"]
    assert result["error"] == "ScoringAborted", result
    assert "compute_score_prime: ItemNotScored" in result["message"] and "reference: is required" in result["message"]


@pytest.mark.parametrize("case", ["prime, the dict form", "prime, the async form"])
def test_verl_prime_refuses_the_forms_it_cannot_read(outcomes, case):
    assert outcomes[case]["error"] == "ScoringAborted", outcomes[case]
    assert "name=compute_score_prime" in outcomes[case]["message"]
