"""AReaL's own RLVR workflow and AsyncRewardWrapper, from its wheel, calling geval_client.trainers.areal
the ways AReaL takes a reward: RLVRWorkflow(reward_fn=<object>) and by import path, each call in
the wrapper's process pool. An inference engine and a tokenizer stand in for the model (a reply's
text decoded with its <|im_end|>, as AReaL decodes it). A failure the completion did not cause,
a server that is down and a server slower than the deadline must each come out of AReaL as our
error, through the pool, never as the 0 AReaL gives a reward past its timeout."""

from __future__ import annotations

import json
import time

import pytest

from tests.frameworks.conftest import installed, run_with
from tests.unit.fakes import serve_in_process
from tests.unit.test_framework_adapters import ScriptedJudge

AREAL = "1.0.4"
# What `import areal.workflow.rlvr` needs beyond the test environment (torch and transformers are in it).
AREAL_IMPORTS = [("colorlog", "6.12.0"), ("tenacity", "9.2.1"), ("flask", "3.1.3"), ("werkzeug", "3.1.9"),
                 ("blinker", "1.9.0"), ("itsdangerous", "2.2.0"), ("torchdata", "0.11.0"), ("hydra-core", "1.3.2"),
                 ("omegaconf", "2.3.0"), ("antlr4-python3-runtime", "4.9.3"), ("orjson", "3.11.3"),
                 ("aiofiles", "25.1.0")]

WORKFLOW = r"""
import asyncio, json, os, socket
from areal.api.cli_args import GenerationHyperparameters
from areal.api.io_struct import ModelResponse
from areal.api.reward_api import AsyncRewardWrapper
from areal.workflow.rlvr import RLVRWorkflow
from geval_client.trainers import areal

TEXTS = ["Summarize the text.", "Twelve chars<|im_end|>", "<|im_end|>", "Fine.<|im_end|>"]

class Tokenizer:  # token i is TEXTS[i]
    eos_token_id = pad_token_id = 99
    def decode(self, ids, skip_special_tokens=False):
        return "".join(TEXTS[i] for i in ids)

class Engine:  # replies with the token the row names
    async def agenerate(self, req):
        return ModelResponse(input_tokens=list(req.input_ids), output_tokens=[self.reply], output_logprobs=[0.0],
                             output_versions=[0], tokenizer=req.tokenizer)

def episode(reward_fn, reply, answer="R"):
    workflow = RLVRWorkflow(reward_fn, GenerationHyperparameters(max_new_tokens=4), Tokenizer(),
                            get_input_ids_fn=lambda data, tokenizer, thinking: [0])
    engine = Engine()
    engine.reply = reply
    data = {"messages": [{"role": "user", "content": "Summarize the text."}], "answer": answer}
    return asyncio.run(workflow.arun_episode(engine, data))["rewards"].tolist()

def outcome(call):
    try:
        value = call()
    except BaseException as error:
        value = {"error": type(error).__name__, "message": str(error)}
    return {"value": value}

def wrapped(reward, timeout_s, **kwargs):
    wrapper = AsyncRewardWrapper(reward, timeout_seconds=timeout_s, max_workers=2, max_retries=0)
    return asyncio.run(wrapper("", "Twelve chars<|im_end|>", [0], [1], **kwargs))

async def many(reward, n):
    wrapper = AsyncRewardWrapper(reward, max_workers=2)
    return await asyncio.gather(*[wrapper("", "x" * (k + 1), [0], [1], answer="R") for k in range(n)])

def channel(reward):  # which client object the process calls through
    return float(id(reward.scorer.client()))

def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"

judge, slow = os.environ["JUDGE"], os.environ["SLOW"]
reward = areal.make_reward_fn(judge, "a")
out = {"parent": reward("", "Fine.", messages="Summarize the text.", answer="R")}  # the parent connects first
out["object"] = outcome(lambda: episode(reward, 1))
out["path"] = outcome(lambda: episode("geval_client.trainers.areal.reward_fn", 1))
out["empty"] = outcome(lambda: episode(reward, 2))
out["unscorable"] = outcome(lambda: episode(reward, 3, answer="MISSING"))
out["down"] = outcome(lambda: wrapped(areal.make_reward_fn(closed_port(), "a"), 15))
out["slow"] = outcome(lambda: wrapped(areal.make_reward_fn(slow, "a", timeout=1), 3))
out["slow, past the wrapper"] = outcome(lambda: wrapped(areal.make_reward_fn(slow, "a", timeout=5), 1))
out["many"] = outcome(lambda: asyncio.run(many(reward, 8)))
out["channels"] = [channel(reward), asyncio.run(AsyncRewardWrapper(channel, max_workers=2)(reward))]
print(json.dumps(out))
"""


class PeerJudge(ScriptedJudge):
    """ScriptedJudge, recording the connection each call came on."""

    def __init__(self) -> None:
        super().__init__()
        self.peers: list[str] = []

    def Score(self, request, context):
        self.peers.append(context.peer())
        return super().Score(request, context)


class SlowJudge(ScriptedJudge):
    """Answers after 3 seconds."""

    def Score(self, request, context):
        time.sleep(3)
        return super().Score(request, context)


@pytest.fixture(scope="module")
def judge():
    yield from serve_in_process(PeerJudge())


@pytest.fixture(scope="module")
def slow():
    yield from serve_in_process(SlowJudge())


@pytest.fixture(scope="module")
def outcomes(judge, slow) -> dict:
    """Every case through AReaL in one interpreter."""
    paths = [installed("areal", AREAL)] + [installed(name, v) for name, v in AREAL_IMPORTS]
    env = {"JUDGE": judge.address, "SLOW": slow.address, "GEVAL_REWARD_SERVER": judge.address,
           "GEVAL_REWARD_RUBRICS": "a"}
    out = run_with(paths, WORKFLOW, timeout=300, env=env)
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("case", ["object", "path"])
def test_areal_rlvr_workflow_takes_the_reward(outcomes, judge, case):
    """The reward as an object (pickled to the pool) and by import path (configured from the
    environment): the judge reads the row's messages, its answer and the reply without <|im_end|>."""
    assert outcomes[case]["value"] == [pytest.approx(0.12)], outcomes[case]
    items = [item for request in judge.requests for item in request.items if item.completion == "Twelve chars"]
    assert items and all(item.reference == "R" for item in items)
    assert items[0].chat.messages[0].content == "Summarize the text."


def test_areal_a_completion_that_fails_for_its_own_reason_gets_on_error(outcomes):
    assert outcomes["empty"]["value"] == [0.0], outcomes["empty"]


def test_areal_an_item_the_judge_cannot_score_stops_the_episode(outcomes):
    """AReaL logs what the reward raises, calls it again, and raises it from the episode."""
    result = outcomes["unscorable"]["value"]
    assert result["error"] == "ItemNotScored" and "items[0].reference: is required" in result["message"], result


def test_areal_a_server_that_is_down_raises_through_the_pool(outcomes):
    """RewardServerError comes back whole from the worker process (it pickles), inside the
    wrapper's 15 s (past them the wrapper itself answers 0, as the slow case shows): not the
    BrokenProcessPool an unpicklable error gives, not a 0."""
    result = outcomes["down"]
    assert result["value"]["error"] == "RewardServerError", result
    assert "UNAVAILABLE" in result["value"]["message"]


def test_areal_a_slow_server_fails_within_the_wrappers_timeout(outcomes):
    """The call's deadline (1 s) ends it before AsyncRewardWrapper's timeout (3 s here), which
    would score it 0: the wrapper itself bounds the time, so our error arriving is the check."""
    result = outcomes["slow"]
    assert result["value"]["error"] == "RewardServerError", result
    assert "DEADLINE_EXCEEDED" in result["value"]["message"]
    # What the deadline prevents: past the wrapper's timeout AReaL trains on 0.
    assert outcomes["slow, past the wrapper"]["value"] == 0


def test_areal_each_worker_process_opens_one_channel(outcomes, judge):
    """Eight rewards through a pool of two processes, after the parent connected: each worker
    calls on a connection of its own (none through the channel it inherited), one per process."""
    assert outcomes["many"]["value"] == [pytest.approx((k + 1) / 100) for k in range(8)]
    parent = judge.peers[0]
    workers = set(judge.peers[-8:])
    assert parent not in workers and 1 <= len(workers) <= 2, judge.peers
    # A forked worker inherits the parent's client object at the same address; it must make its own.
    in_parent, in_worker = outcomes["channels"]
    assert in_parent != in_worker
