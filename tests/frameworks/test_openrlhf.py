"""OpenRLHF's own reward gathering, from its wheel, fed by the file reward_func and the bridge.

0.8.x-0.9.0 call a --remote_rm_url reward through RemoteRewardModel.get_rewards
(openrlhf/utils/remote_rm_utils.py, imported as shipped) and gather the returns with
experience_maker.py: 0.8.0-0.8.2 with the statement `torch.cat(rewards_list, dim=0)` inside a
method (run as written there), 0.8.3 on with update_samples_with_rewards (taken from the file
and run). Ray is replaced by an in-process stand-in that calls what it is given (Ray's own
behaviour is tests/frameworks/test_ray.py's); the packages' __init__ (which import deepspeed)
are skipped."""

from __future__ import annotations

import json

import pytest

from tests.frameworks.conftest import installed, run_with
from tests.unit.fakes import serve_in_process
from tests.unit.test_framework_adapters import PROMPT, ScriptedJudge

GATHER = r"""
import ast, json, os, pathlib, sys, threading, types
from types import SimpleNamespace
import torch

version, mode, address = os.environ["OPENRLHF_VERSION"], os.environ["MODE"], os.environ["JUDGE"]
package = pathlib.Path(next(p for p in sys.path if p.endswith("openrlhf-" + version))) / "openrlhf"
for name in ("openrlhf", "openrlhf.utils", "openrlhf.trainer", "openrlhf.trainer.ppo_utils"):
    module = types.ModuleType(name)
    module.__path__ = [str(package.joinpath(*name.split(".")[1:]))]
    sys.modules[name] = module

class Remote:  # ray.remote, called in process
    def __init__(self, target):
        self.target = target
    def remote(self, *args, **kwargs):
        return self.target(*args, **kwargs)

sys.modules["ray"] = types.SimpleNamespace(remote=Remote, get=lambda refs: refs)
from openrlhf.utils import remote_rm_utils

prompt = os.environ["PROMPT"]
queries = [prompt + c + "<|im_end|>" for c in ("Four", "Eight ch", "", "Twelve chars")]
if mode == "file":
    url = os.path.join(os.environ["TMP"], "geval_reward.py")
    pathlib.Path(url).write_text(
        "from geval_client.openrlhf import make_reward_func\n"
        f"reward_func = make_reward_func({address!r}, 'a')\n")
else:
    from geval_client.trainers import openrlhf, openrlhf_bridge
    server = openrlhf_bridge.serve(openrlhf.OpenRLHFReward.configure(server=address, rubrics="a"), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/get_reward"

model = remote_rm_utils.RemoteRewardModel.remote(SimpleNamespace(micro_rollout_batch_size=2), url)
returns = model.get_rewards(queries, [prompt] * 4, ["R"] * 4)
samples_list = [SimpleNamespace(sequences=torch.zeros(2, 3), info={}) for _ in range(2)]
source = (package / "trainer/ppo_utils/experience_maker.py").read_text()
[gather] = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)
            and n.name == "update_samples_with_rewards"] or [None]
if gather is None:  # 0.8.0-0.8.2: in RemoteExperienceMaker.make_experience
    statement = "rewards_list = torch.cat(rewards_list, dim=0).chunk(len(samples_list))"
    assert statement in source
    scope = {"torch": torch, "rewards_list": returns, "samples_list": samples_list}
    exec(statement, scope)
    rewards, logs = [r.tolist() for r in scope["rewards_list"]], {}
else:
    scope = {"torch": torch}
    exec(compile(ast.Module([gather], []), "experience_maker.py", "exec"), scope)
    scope["update_samples_with_rewards"](returns, samples_list)
    rewards = [s.rewards.tolist() for s in samples_list]
    logs = {k: [s.info[k].tolist() for s in samples_list] for k in samples_list[0].info if k.startswith("geval")}
print(json.dumps({"rewards": rewards, "logs": logs}))
"""


@pytest.fixture(scope="module")
def judge():
    yield from serve_in_process(ScriptedJudge())


def gathered(version: str, mode: str, judge, tmp_path) -> dict:
    out = run_with([installed("openrlhf", version)], GATHER, env={
        "OPENRLHF_VERSION": version, "MODE": mode, "JUDGE": judge.address, "PROMPT": PROMPT, "TMP": str(tmp_path)})
    return json.loads(out.strip().splitlines()[-1])


def close(a, b):
    return all(x == pytest.approx(y, abs=1e-6) for x, y in zip(sum(a, []), sum(b, []))) and len(a) == len(b)


@pytest.mark.parametrize("version", ["0.8.2", "0.8.5", "0.8.11", "0.9.0"])
def test_openrlhf_gathers_the_file_reward_funcs_rewards(version, judge, tmp_path):
    result = gathered(version, "file", judge, tmp_path)
    assert close(result["rewards"], [[0.04, 0.08], [0.0, 0.12]])  # "" failed: on_error 'min'
    if version != "0.8.2":  # 0.8.0-0.8.2 read rewards only
        assert close(result["logs"]["geval_failed"], [[0.0, 0.0], [1.0, 0.0]])


@pytest.mark.parametrize("version", ["0.8.2", "0.8.11", "0.9.0"])
def test_openrlhf_gathers_the_bridges_rewards(version, judge, tmp_path):
    result = gathered(version, "bridge", judge, tmp_path)
    assert close(result["rewards"], [[0.04, 0.08], [0.0, 0.12]])


def test_openrlhf_0_8_5_takes_no_http_reward_server(judge, tmp_path):
    """0.8.3-0.8.9 torch.cat the "rewards" list of an HTTP reply as JSON gave it: no HTTP reward
    server can answer them, which docs/trainers/openrlhf.md says; the file reward_func works there."""
    with pytest.raises(AssertionError, match="expected Tensor as element 0 in argument 0, but got list"):
        gathered("0.8.5", "bridge", judge, tmp_path)


AGENT = r"""
import ast, asyncio, json, os, pathlib, sys, threading, types
from types import SimpleNamespace
import torch

version, mode, address = os.environ["OPENRLHF_VERSION"], os.environ["MODE"], os.environ["JUDGE"]
prompt = os.environ["PROMPT"]
labels = json.loads(os.environ["LABELS"])
package = pathlib.Path(next(p for p in sys.path if p.endswith("openrlhf-" + version))) / "openrlhf"
for name in ("openrlhf", "openrlhf.utils", "openrlhf.trainer", "openrlhf.trainer.ppo_utils"):
    module = types.ModuleType(name)
    module.__path__ = [str(package.joinpath(*name.split(".")[1:]))]
    sys.modules[name] = module
# samples_generator's imports that need a GPU stack: vLLM's SamplingParams, Ray and the engine calls
sys.modules["vllm"] = types.SimpleNamespace(SamplingParams=SimpleNamespace)
sys.modules["ray"] = types.ModuleType("ray")
sys.modules["openrlhf.trainer.ray"] = types.ModuleType("openrlhf.trainer.ray")
sys.modules["openrlhf.trainer.ray.vllm_engine"] = types.SimpleNamespace(batch_vllm_engine_call=None)
from openrlhf.utils.agent import SingleTurnAgentExecutor
from openrlhf.trainer.ppo_utils.experience import Experience
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

if mode == "file":
    url = os.path.join(os.environ["TMP"], "geval_reward.py")
    pathlib.Path(url).write_text(
        "from geval_client.openrlhf import make_reward_func\n"
        f"reward_func = make_reward_func({address!r}, 'a')\n")
else:
    from geval_client.trainers import openrlhf, openrlhf_bridge
    server = openrlhf_bridge.serve(openrlhf.OpenRLHFReward.configure(server=address, rubrics="a"), "127.0.0.1", 0,
                                   extra_logs=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/get_reward"

class Tokenizer:  # one token per character
    pad_token_id = 0
    def __call__(self, text, add_special_tokens=False, return_tensors=None):
        return {"input_ids": torch.tensor([[ord(c) for c in text]])}
    def decode(self, ids, skip_special_tokens=False):
        return "".join(map(chr, ids))

class Engine:  # vLLM's generate: the scripted completion, ended as a chat model ends it
    def __init__(self, completion):
        self.completion = completion + "<|im_end|>"
    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=[ord(c) for c in self.completion],
                                                        finish_reason="stop", logprobs=None)])

executor = SingleTurnAgentExecutor(url)
params = SimpleNamespace(max_tokens=64, logprobs=None)

async def rollout():
    return await asyncio.gather(*[executor.execute(prompt, label, params, 4096, Tokenizer(), Engine(completion))
                                  for completion, label in zip(("Four", "Eight ch", "", "Twelve chars"), labels)])

samples = [SamplesGenerator._process_response_into_experience(None, r, max_len=4096) for r in asyncio.run(rollout())]
source = (package / "trainer/ppo_utils/experience_maker.py").read_text()
[split] = [f for c in ast.parse(source).body if isinstance(c, ast.ClassDef) for f in c.body
           if isinstance(f, ast.FunctionDef) and f.name == "split_rollout_samples"]
scope = {"Experience": Experience}
exec(compile(ast.Module([split], []), "experience_maker.py", "exec"), scope)
maker = SimpleNamespace(args=SimpleNamespace(train=SimpleNamespace(dynamic_batch_enable=False),
                                             rollout=SimpleNamespace(micro_batch_size=2)),
                        tokenizer=Tokenizer())
statement = "raw_rewards = torch.cat([experience.rewards for experience in experiences], dim=0)"
assert statement in source
no_rewards = 'raise ValueError("reward_model_group is required when rewards are not precomputed")'
assert "use_reward_model = samples_list[0].rewards is None" in source and no_rewards in source
try:
    experiences = scope["split_rollout_samples"](maker, samples)
    if experiences[0].rewards is None:  # make_experience, with no reward model beside the remote reward
        raise ValueError("reward_model_group is required when rewards are not precomputed")
    exec(statement, {"torch": torch, "experiences": experiences})
except Exception as error:
    print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
else:
    print(json.dumps({"rewards": [e.rewards.flatten().tolist() for e in experiences],
                      "failed": [e.info["geval_failed"].flatten().tolist() for e in experiences]}))
"""


def agent_rollout(mode: str, judge, tmp_path, labels=("R",) * 4) -> dict:
    out = run_with([installed("openrlhf", "0.11.2")], AGENT, env={
        "OPENRLHF_VERSION": "0.11.2", "MODE": mode, "JUDGE": judge.address, "PROMPT": PROMPT, "TMP": str(tmp_path),
        "LABELS": json.dumps(list(labels))})
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["file", "bridge"])
def test_openrlhf_0_11_takes_each_samples_reward(mode, judge, tmp_path):
    """0.9.1 on (here 0.11.2's own SingleTurnAgentExecutor.execute, _process_response_into_experience,
    split_rollout_samples and the advantage's torch.cat of the rewards): one reward call per sample."""
    result = agent_rollout(mode, judge, tmp_path)
    assert close(result["rewards"], [[0.04, 0.08], [0.0, 0.12]]) and result["failed"] == [[0.0, 0.0], [1.0, 0.0]]


@pytest.mark.parametrize(("failing", "error"), [
    (0, "ValueError: reward_model_group is required when rewards are not precomputed"),
    (1, "AttributeError: 'NoneType' object has no attribute 'size'"),
])
def test_openrlhf_0_11_fails_later_on_a_reward_it_caught(failing, error, judge, tmp_path):
    """A failure the completion did not cause (a reference the rubric needs is missing): reward_func logs it at
    ERROR and raises; 0.11.2 logs it at INFO, leaves the sample without a reward and fails while making the
    experience, with an error that depends on where the sample stands in its micro-batch (docs/trainers/openrlhf.md)."""
    labels = ["R"] * 4
    labels[failing] = "MISSING"
    assert agent_rollout("file", judge, tmp_path, labels=labels) == {"error": error}
