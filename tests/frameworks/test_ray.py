"""A reward that fails scoring inside a real local Ray, at the oldest and the newest Ray the docs
name: veRL's prime and rate_limited forms raise ScoringAborted past a framework's
`except Exception`, from a task, a task running it in a process pool (as prime does), a threaded
actor and an asyncio actor (where rate_limited runs, in veRL's reward loop workers). Each must
end in one error for the caller whose message names the cause, the reward called once and the
actor still alive; Ray 2.48 and older crash on a plain BaseException and make the call's
TaskCancelledError without a message (geval_client/trainers/shared/aborts.py)."""

from __future__ import annotations

import json

import pytest

from tests.frameworks.conftest import installed, run_with
from tests.unit.fakes import serve_in_process
from tests.unit.test_framework_adapters import ScriptedJudge

FAIL_IN_RAY = r"""
import asyncio, json, os, sys, time, ray
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from geval_client import verl

sys.stderr = sys.stdout  # the workers' log lines Ray forwards, in the output the test reads

address = os.environ["JUDGE"]
sample = dict(data_source="d", solution_str="Fine.", ground_truth="MISSING", extra_info={"prompt": "P"})
options = dict(server=address, rubrics="a")

def framework_catch(call):  # prime's single_compute_score, sync
    try:
        return call()
    except Exception:
        return 0.0

@ray.remote
def task():
    return framework_catch(lambda: verl.compute_score_prime(**sample, **options))

@ray.remote
def task_with_pool():  # prime: the reward in a process pool, sent back pickled
    async def score():
        with ProcessPoolExecutor(max_workers=1) as pool:
            try:
                return await asyncio.get_running_loop().run_in_executor(
                    pool, partial(verl.compute_score_prime, **sample, **options))
            except Exception:
                return 0.0
    return asyncio.run(score())

@ray.remote
class Threaded:
    def score(self):
        return framework_catch(lambda: verl.compute_score_prime(**sample, **options))
    def alive(self):
        return True

@ray.remote
class Asyncio:  # veRL's RewardLoopWorker running the rate_limited manager
    async def score(self):
        async def run_single():
            try:
                return await asyncio.wait_for(verl.compute_score_rate_limited(**sample, **options), 300)
            except Exception:
                return 0.0
        return await asyncio.gather(run_single())
    async def alive(self):
        return True

ray.init(num_cpus=2, include_dashboard=False)
outcomes = {}
for name, make in (("task", lambda: (task.remote(), None)),
                   ("task with a process pool", lambda: (task_with_pool.remote(), None)),
                   ("threaded actor", lambda: ((a := Threaded.remote()).score.remote(), a)),
                   ("asyncio actor", lambda: ((a := Asyncio.remote()).score.remote(), a))):
    ref, actor = make()
    try:
        outcome = {"returned": ray.get(ref, timeout=120)}
    except Exception as error:
        outcome = {"error": type(error).__name__, "message": str(error)}
    if actor is not None:
        outcome["alive"] = ray.get(actor.alive.remote(), timeout=60)
    outcomes[name] = outcome
time.sleep(2)  # Ray forwards the workers' log lines on its own schedule
print(json.dumps(outcomes))
"""


@pytest.fixture
def judge():
    yield from serve_in_process(ScriptedJudge())


@pytest.mark.parametrize("version", ["2.48.0", "2.60.0"])
def test_a_reward_failing_in_ray_ends_in_one_error_naming_its_cause(version, judge):
    paths = [installed("ray", version), installed("msgpack", "1.1.1")]
    out = run_with(paths, FAIL_IN_RAY, timeout=300, env={"JUDGE": judge.address, "RAY_DEDUP_LOGS": "0"})
    outcomes = json.loads(out.strip().splitlines()[-1])
    assert len(judge.requests) == 4  # each reward called once: no retry of a crashed worker
    cause = "items[0].reference: is required"
    for name, outcome in outcomes.items():
        assert "error" in outcome and outcome.get("alive", True), (name, outcome)
        form = "compute_score_rate_limited" if name == "asyncio actor" else "compute_score_prime"
        assert f"geval_client.verl.{form}: ItemNotScored: " in outcome["message"], (name, outcome)
        assert cause in outcome["message"], (name, outcome)
        if version == "2.48.0":
            # Reported as the call's cancellation, with the cause as its message; the ERROR line logged
            # before the raise is forwarded to the driver as well.
            assert "TaskCancelledError" in outcome["error"], (name, outcome)
        else:
            assert "ScoringAborted" in outcome["message"], (name, outcome)
    if version == "2.48.0":
        forwarded = [line for line in out.splitlines() if "geval_client.verl.compute_score_" in line and cause in line]
        assert any("compute_score_prime" in line for line in forwarded), out
        assert any("compute_score_rate_limited" in line for line in forwarded), out
