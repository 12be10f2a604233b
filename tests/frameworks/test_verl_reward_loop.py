"""veRL's reward loop, from its wheel: the config composed by Hydra from the version's own
ppo_trainer.yaml with the overrides docs/trainers/verl.md gives for it (0.7.0's legacy keys, the
README's reward.* keys for 0.7.1-0.9.1), then the RewardLoopWorker the trainer runs in each
reward actor (verl/experimental/reward_loop/reward_loop.py, as shipped; only its tokenizer
loading is replaced by a stand-in that decodes a response to its sample's text) scoring a
batch through the manager the overrides name. A missing reference (a failure the completion
did not cause) must stop the step: rate_limited would turn an Exception into 0.0."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from tests.engine.readme_snippets import README_SERVER, snippet
from tests.frameworks.conftest import installed, run_with
from tests.frameworks.test_verl import VERL_IMPORTS
from tests.unit.fakes import serve_in_process
from tests.unit.test_framework_adapters import ScriptedJudge

VERL_PAGE = pathlib.Path(__file__).parents[2] / "docs" / "trainers" / "verl.md"

LOOP = r"""
import asyncio, json, os, pathlib, shlex
import numpy as np, torch, transformers
from hydra import compose, initialize_config_dir
# veRL 0.7.0's reward loop imports verl.utils.model, which imports a class the test environment's
# transformers renamed (AutoModelForImageTextToText); the reward path never uses it.
if not hasattr(transformers, "AutoModelForVision2Seq"):
    transformers.AutoModelForVision2Seq = transformers.AutoModelForImageTextToText
import verl
from verl import DataProto
from verl.experimental.reward_loop import reward_loop

texts = ["Four", "", "Twelve chars"]

class Tokenizer:  # response token 0 holds the sample's index
    eos_token = "</s>"
    def decode(self, ids, skip_special_tokens=True):
        return texts[int(ids[0])]

reward_loop.copy_to_local = lambda path, **kwargs: path
reward_loop.hf_tokenizer = lambda path, **kwargs: Tokenizer()

def batch(references):
    n = len(texts)
    return DataProto.from_dict(
        tensors={"prompts": torch.ones(n, 2, dtype=torch.long),
                 "responses": torch.tensor([[i, 1, 1] for i in range(n)]),
                 "attention_mask": torch.ones(n, 5, dtype=torch.long)},
        non_tensors={"data_source": np.array(["d"] * n, dtype=object),
                     "reward_model": np.array([{"ground_truth": r} for r in references], dtype=object),
                     "extra_info": np.array([{"prompt": "Summarize."} for _ in texts], dtype=object)})

# 0.7.0 declares the worker a Ray actor (@ray.remote); its class is what each actor runs
Worker = getattr(reward_loop.RewardLoopWorker, "__ray_actor_class__", reward_loop.RewardLoopWorker)

async def score(config, references):  # the worker and its manager take the running event loop when made
    worker = Worker(config)
    return await worker.compute_score_batch(batch(references))

results = []
with initialize_config_dir(config_dir=str(pathlib.Path(verl.__file__).parent / "trainer/config"), version_base=None):
    for case in json.loads(os.environ["CASES"]):
        config = compose("ppo_trainer", overrides=shlex.split(case["overrides"]))
        try:
            outputs = asyncio.run(score(config, case["references"]))
        except BaseException as error:
            results.append({"raised": type(error).__name__, "message": str(error)})
        else:
            results.append({"scores": [o["reward_score"] for o in outputs],
                            "failed": [o["reward_extra_info"]["failed"] for o in outputs]})
print(json.dumps(results))
"""


def docs_overrides(holding: str) -> str:
    """The overrides of the one bash block of docs/trainers/verl.md holding `holding`."""
    blocks = [b for b in re.findall(r"^```bash\n(.*?)^```", VERL_PAGE.read_text(), re.MULTILINE | re.DOTALL)
              if holding in b]
    assert len(blocks) == 1, f"{len(blocks)} blocks of docs/trainers/verl.md hold {holding!r}"
    return blocks[0]


# The form each version takes, as the docs give it: the README's for 0.7.1-0.9.1, 0.7.0's own.
COMMANDS = {"0.9.1": lambda: snippet("bash", "pkg://geval_client.verl"),
            "0.7.0": lambda: docs_overrides("reward_model.reward_manager=rate_limited")}


def overrides(version: str, manager: str, name: str, address: str) -> str:
    command = COMMANDS[version]().replace("python -m verl.trainer.main_ppo ...", "").replace("\\\n", " ")
    command = command.replace("compute_score_rate_limited", name).replace("=rate_limited", f"={manager}")
    return command.replace(README_SERVER, address) + " actor_rollout_ref.model.path=stand-in"


@pytest.fixture(scope="module")
def judge():
    yield from serve_in_process(ScriptedJudge())


SCORED = [("naive", "compute_score_async"), ("naive", "compute_score"), ("dapo", "compute_score_async"),
          ("rate_limited", "compute_score_rate_limited")]
STOPPED = [("naive", "compute_score_async", "ItemNotScored"),
           ("rate_limited", "compute_score_rate_limited", "ScoringAborted")]


# 0.7.0's reward loop module imports its trainer (ray_trainer.py), which imports torchdata.
LOOP_IMPORTS = {"0.7.0": [("torchdata", "0.11.0"), ("peft", "0.21.2")], "0.9.1": []}


@pytest.fixture(scope="module", params=["0.7.0", "0.9.1"])
def loop(request, judge):
    """Every case below run through one version's reward loop, in one interpreter (veRL imports in tens of seconds)."""
    version = request.param
    cases = [{"overrides": overrides(version, m, n, judge.address), "references": ["R"] * 3} for m, n in SCORED]
    cases += [{"overrides": overrides(version, m, n, judge.address), "references": ["R", "R", "MISSING"]}
              for m, n, _ in STOPPED]
    paths = [installed("verl", version), *(installed(p, v) for p, v in VERL_IMPORTS + LOOP_IMPORTS[version])]
    results = json.loads(run_with(paths, LOOP, timeout=300, env={"CASES": json.dumps(cases)}).strip().splitlines()[-1])
    return dict(zip([c[:2] for c in SCORED] + [c[:2] + ("stopped",) for c in STOPPED], results))


@pytest.mark.parametrize(("manager", "name"), SCORED)
def test_verl_reward_loop_scores_through_the_documented_overrides(loop, manager, name):
    result = loop[manager, name]
    assert result["scores"] == pytest.approx([0.04, 0.0, 0.12]) and result["failed"] == [0.0, 1.0, 0.0]


@pytest.mark.parametrize(("manager", "name", "raised"), STOPPED)
def test_verl_reward_loop_stops_on_a_failure_the_completion_did_not_cause(loop, manager, name, raised):
    result = loop[manager, name, "stopped"]
    assert result["raised"] == raised and "reference" in result["message"], result
