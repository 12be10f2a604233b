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
    from geval_client import openrlhf, openrlhf_bridge
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
    server can answer them, which docs/trainers.md says; the file reward_func works there."""
    with pytest.raises(AssertionError, match="expected Tensor as element 0 in argument 0, but got list"):
        gathered("0.8.5", "bridge", judge, tmp_path)
