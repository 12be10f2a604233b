"""Unsloth's GRPO trainer (TRL's GRPOTrainer as Unsloth rewrites it) taking geval_client.trl's
AsyncGEvalReward, on CPU: one step against a scripted judge served over gRPC, its rewards and
diagnostics in the trainer's logs; then a server that is down stops train() with
RewardServerError. On a machine without a GPU `import unsloth` takes its CPU backend, which
leaves TRL's trainers as they are, so the test calls PatchFastRL("GRPO") (Unsloth's own switch,
which its GPU import runs) to train with Unsloth's trainer. One step of 2 completions of 4 tokens
with the SmolLM2-135M checkpoint the server's setup converts."""

from __future__ import annotations

import json
import pathlib
import socket

import pytest

from tests.frameworks.conftest import installed, run_with
from tests.unit.fakes import serve_in_process
from tests.unit.test_framework_adapters import ScriptedJudge

UNSLOTH = [("unsloth", "2026.10.9"), ("unsloth-zoo", "2026.10.9"), ("peft", "0.21.2")]
POLICY = pathlib.Path("~/.cache/geval-reward/models/smollm2-135m-instruct").expanduser()

STEP = r"""
import json, os
import unsloth
from unsloth import FastLanguageModel
from unsloth.models.rl import PatchFastRL

PatchFastRL("GRPO")
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer
from geval_client.retry import RetryPolicy
from geval_client.trl import AsyncGEvalReward

model, tokenizer = FastLanguageModel.from_pretrained(model_name=os.environ["POLICY"], max_seq_length=128,
                                                     load_in_4bit=False)
dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": "Summarize: the council voted for a library."}],
                              "reference": "A library."}] * 2)

def trainer(server, name, **options):
    return GRPOTrainer(
        model=model, processing_class=tokenizer, train_dataset=dataset,
        reward_funcs=[AsyncGEvalReward(server, "a", reference_column="reference", name=name, **options)],
        args=GRPOConfig(output_dir=os.environ["OUT"], use_cpu=True, bf16=False, max_steps=1,
                        per_device_train_batch_size=2, num_generations=2, max_completion_length=4,
                        logging_steps=1, save_strategy="no", report_to="none"))

step = trainer(os.environ["JUDGE"], "geval")
step.train()
outcome = {"trainer": type(step).__name__, "logs": step.state.log_history[0]}
try:
    trainer(os.environ["DOWN"], "geval_down", retry=RetryPolicy(wait_for_server_s=1.0)).train()
except Exception as error:
    outcome["down"] = {"error": type(error).__name__, "message": str(error)}
print(json.dumps(outcome))
"""


@pytest.fixture(scope="module")
def judge():
    yield from serve_in_process(ScriptedJudge())


@pytest.fixture(scope="module")
def outcome(judge, tmp_path_factory) -> dict:
    if not POLICY.exists():
        pytest.skip(f"the policy checkpoint {POLICY} is made by the server's setup (make setup)")
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        down = f"127.0.0.1:{closed.getsockname()[1]}"
    work = tmp_path_factory.mktemp("unsloth")
    env = {"JUDGE": judge.address, "DOWN": down, "POLICY": str(POLICY), "OUT": str(work / "out"),
           # Unsloth writes the trainers it generates to ./unsloth_compiled_cache unless told where.
           "UNSLOTH_COMPILE_LOCATION": str(work / "compiled")}
    out = run_with([installed(name, version) for name, version in UNSLOTH], STEP, timeout=1200, env=env)
    return json.loads(out.strip().splitlines()[-1])


def test_unsloth_grpo_trainer_takes_the_async_reward(outcome, judge):
    assert outcome["trainer"] == "UnslothGRPOTrainer"
    logs = outcome["logs"]
    assert 0.0 < logs["rewards/geval/mean"] < 1.0  # the scripted judge's length / 100
    assert logs["geval/label_mass"] == pytest.approx(0.75)
    assert logs["geval/failed_share"] == 0.0
    assert any(item.reference == "A library." for request in judge.requests for item in request.items)


def test_unsloth_grpo_trainer_stops_when_the_server_is_down(outcome):
    assert outcome["down"]["error"] == "RewardServerError", outcome["down"]
