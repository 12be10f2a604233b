"""verifiers' own code (0.4.0, its wheel) running the judge plugin `geval-reward` as a user plugs
it in: a task config's `judges` resolved by verifiers' loader, `Task.score` awaiting the judge
on traces built from verifiers' classes (several at once, as rollouts finish together), and
the `vf-replay` command re-scoring a saved run with `--taskset.task.judges`. A judge failure
must error the trace (verifiers' TaskError, the reward left None), never read as 0."""

from __future__ import annotations

import json

import pytest

from tests.frameworks.conftest import installed, run_with
from tests.unit.fakes import serve_in_process
from tests.unit.test_framework_adapters import ScriptedJudge
from tests.unit.test_step_rewards_in_trainers import StepJudge

VERSION = "0.4.0"
# What `import verifiers.v1` needs beyond the test environment, each pinned as verifiers 0.4.0 takes it.
VERIFIERS_IMPORTS = [("prime-pydantic-config", "0.4.3"), ("tenacity", "9.2.1"), ("tomli-w", "1.2.0"),
                     ("renderers", "0.1.12"), ("prime-sandboxes", "0.5.1"), ("connectrpc", "0.11.1"),
                     ("pyqwest", "0.12.0"), ("aiofiles", "25.1.0"), ("protobuf-py", "0.1.1"),
                     ("math-verify", "0.9.0"), ("latex2sympy2_extended", "1.11.0"),
                     ("antlr4-python3-runtime", "4.9.3"), ("tomli", "2.5.0")]

SCRIPT = r"""
import asyncio, json, os, pathlib, sys, tempfile
import verifiers.v1 as vf
from verifiers.v1.cli import replay
from verifiers.v1.cli.output import write_config
from verifiers.v1.configs.cli.replay import ReplayConfig
from verifiers.v1.configs.task import TaskConfig
from verifiers.v1.utils.loaders import judge_class
from verifiers.v1.utils.trace_store import append_trace

JUDGE = os.environ["JUDGE"]
work = pathlib.Path(tempfile.mkdtemp())
(work / "qa_taskset").mkdir()
(work / "qa_taskset" / "__init__.py").write_text('''
import verifiers.v1 as vf

class QA(vf.TaskData):
    answer: str | list[str] | None = None

class QATask(vf.Task[QA, vf.State]):
    pass

class QATaskset(vf.Taskset[QATask]):
    def load(self):
        yield QATask(QA(prompt="Summarize.", answer="R"), self.config.task)

__all__ = ["QATaskset"]
''')
sys.path.insert(0, str(work))
from qa_taskset import QA, QATask


def trace_of(data, reply):
    return vf.Trace(task=vf.TraceTask(type="QATask", data=data), agent=vf.AgentInfo(config=vf.AgentConfig()), ok=True,
                    nodes=[vf.MessageNode(message=vf.UserMessage(content=data.prompt)),
                           vf.MessageNode(parent=0, message=vf.AssistantMessage(content=reply), sampled=True)])


async def scored(judge, *rows):
    # Each (answer, reply) scored by Task.score, all at once, the judge plugged by config.
    config = TaskConfig.model_validate({"judges": [{"id": "geval-reward", "server": JUDGE, **judge}]})

    async def one(answer, reply):
        data = QA(prompt="Summarize.", answer=answer)
        trace = trace_of(data, reply)
        try:
            await QATask(data, config).score(trace)
        except Exception as error:
            return {"error": type(error).__name__, "cause": type(error.__cause__).__name__, "message": str(error),
                    "rewards": {k: r and r.score for k, r in trace.rewards.items()}}
        return {"rewards": {k: r.score for k, r in trace.rewards.items()}, "reward": trace.reward,
                "metrics": trace.metrics}

    return await asyncio.gather(*(one(answer, reply) for answer, reply in rows))


def replayed():
    # vf-replay re-scores a saved run (written by verifiers' own store) with the judge given on its command line.
    source, rescored = work / "run", work / "rescored"
    write_config(ReplayConfig.model_validate({"taskset": {"id": "qa_taskset"}}), source, "replay.json")

    async def write():
        lock = asyncio.Lock()
        for answer, reply in [("R", "Ten chars!"), ("MISSING", "Nine chr!")]:
            await append_trace(source, trace_of(QA(prompt="Summarize.", answer=answer), reply), lock)

    asyncio.run(write())
    judges = [{"id": "geval-reward", "server": JUDGE, "rubrics": "a"}]
    replay.main([str(source), "--taskset.task.judges", json.dumps(judges), "--no-rich", "--output-dir", str(rescored)])
    rows = [json.loads(line) for line in (rescored / "traces.jsonl").read_text().splitlines()]
    return [{"rewards": t["rewards"], "errors": [e["message"] for e in t["errors"]]}
            for row in rows for t in row["traces"]]


def vf_eval_configs():
    # vf-eval's config (the calls its main makes) from the flag and from a TOML file: the judges it would run.
    from pydantic_config import cli
    from verifiers.v1.cli.resolve import narrow_config
    from verifiers.v1.configs.cli.eval import EvalConfig

    (work / "run.toml").write_text(
        '[[env.taskset.task.judges]]\nid = "geval-reward"\nserver = ["judge-0:50051", "judge-1:50051"]\n'
        'rubrics = { summeval-coherence = 1, summeval-relevance = 3 }\n')
    flag = json.dumps([{"id": "geval-reward", "server": "judge:50051", "rubrics": "summeval-coherence"}])
    parsed = []
    for argv in (["--env.taskset.task.judges", flag], ["@", str(work / "run.toml")]):
        sys.argv = ["vf-eval", *argv]
        [judge] = cli(narrow_config(EvalConfig, argv)).env.taskset.task.judges
        parsed.append([type(judge).__name__, judge.server, judge.rubrics])
    return parsed


async def main():
    out = {"loader": judge_class("geval-reward").__name__, "vf-eval configs": vf_eval_configs()}
    [out["one rubric"]] = await scored({"rubrics": "a"}, ("The reference.", "Ten chars?"))
    [out["several rubrics"]] = await scored({"rubrics": {"a": 1, "b": 3}, "name": "g"}, ("R", "Ten chars!"))
    [out["a list answer"]] = await scored({}, (["first", "second"], "Twelve chars"))
    [out["full trace"]] = await scored({"view": "full_trace", "answer_field": ""}, (None, "Eleven char"))
    out["together"] = await scored({}, ("R", "Four"), ("MISSING", "Five!"), ("R", ""), ("R", "Seven!!"))
    [out["no such field"]] = await scored({"answer_field": "gold"}, ("R", "Ten chars!"))
    [out["process reward"]] = await scored(
        {"server": os.environ["STEP_JUDGE"], "rubrics": "process-reward-model", "steps": {"delimiter": "##"}},
        ("R", "One.##Two.##Three."))
    [out["server down"]] = await scored({"server": "127.0.0.1:1", "wait_for_server_s": 0}, ("R", "Ten chars!"))
    try:
        TaskConfig.model_validate({"judges": [{"id": "geval-reward", "mode": "fast"}]})
    except Exception as error:
        out["a bad mode"] = str(error)
    print(json.dumps(out))


asyncio.run(main())
print(json.dumps(replayed()))
"""


@pytest.fixture(scope="module")
def judge():
    yield from serve_in_process(ScriptedJudge())


@pytest.fixture(scope="module")
def step_judge():
    yield from serve_in_process(StepJudge())


@pytest.fixture(scope="module")
def outcomes(judge, step_judge) -> dict:
    """Every case through verifiers, in one interpreter (importing verifiers takes seconds)."""
    paths = [installed("verifiers", VERSION)] + [installed(name, v) for name, v in VERIFIERS_IMPORTS]
    env = {"JUDGE": judge.address, "STEP_JUDGE": step_judge.address}
    *_, scored, replayed = run_with(paths, SCRIPT, timeout=300, env=env).strip().splitlines()
    return {**json.loads(scored), "replay": json.loads(replayed)}


def _items(judge) -> dict[str, tuple]:
    """completion -> (prompt, reference or None, rubric names) as the server received it."""
    return {item.completion: (item.text, item.reference if item.HasField("reference") else None,
                              [r.name for r in request.rubrics])
            for request in judge.requests for item in request.items}


def test_verifiers_loader_resolves_the_plugin_by_its_id(outcomes):
    assert outcomes["loader"] == "GEvalJudge"


def test_vf_eval_takes_the_judge_from_its_flag_and_from_a_toml_file(outcomes):
    assert outcomes["vf-eval configs"] == [
        ["GEvalJudgeConfig", "judge:50051", "summeval-coherence"],
        ["GEvalJudgeConfig", ["judge-0:50051", "judge-1:50051"],
         {"summeval-coherence": 1.0, "summeval-relevance": 3.0}],
    ]


def test_one_rubric_gives_one_reward_against_the_prompt_and_the_reference(outcomes, judge):
    assert outcomes["one rubric"]["rewards"] == {"geval-reward": pytest.approx(0.1)}
    assert outcomes["one rubric"]["metrics"]["geval-reward/label_mass"] == 0.75
    assert _items(judge)["Ten chars?"] == ("Summarize.", "The reference.", ["a"])


def test_several_rubrics_give_their_shares_of_the_weighted_reward(outcomes):
    """ScriptedJudge: rubric a reads 0.1, b 0.05; weights 1 and 3, so shares 0.025 and 0.0375."""
    several = outcomes["several rubrics"]
    assert several["rewards"] == {"g/a": pytest.approx(0.025), "g/b": pytest.approx(0.0375)}
    assert several["reward"] == pytest.approx(0.0625)
    assert (several["metrics"]["g/a"], several["metrics"]["g/b"]) == (pytest.approx(0.1), pytest.approx(0.05))


def test_a_list_answer_is_one_reference_a_line(judge, outcomes):
    assert _items(judge)["Twelve chars"][1] == "first\nsecond"


def test_the_full_trace_view_reads_the_transcript(judge, outcomes):
    [transcript] = [c for c in _items(judge) if c.endswith("Eleven char")]
    assert transcript == "[user]\nSummarize.\n\n[assistant]\nEleven char"
    assert _items(judge)[transcript][1] is None
    assert outcomes["full trace"]["rewards"] == {"geval-reward": pytest.approx(len(transcript) / 100)}


def test_traces_scored_together_go_as_one_call_each_with_its_own_outcome(judge, outcomes):
    together = outcomes["together"]
    assert [len(r.items) for r in judge.requests if any(i.completion == "Four" for i in r.items)] == [4]
    assert together[0]["rewards"] == {"geval-reward": pytest.approx(0.04)}
    assert together[3]["rewards"] == {"geval-reward": pytest.approx(0.07)}
    # An empty reply is the policy's doing: on_error "min", 0.0, as verifiers' judges score it.
    assert together[2]["rewards"] == {"geval-reward": 0.0} and together[2]["metrics"]["geval-reward/failed"] == 1.0
    # No reference where the rubric needs one: the trace errors, its reward left unscored.
    assert (together[1]["error"], together[1]["cause"]) == ("TaskError", "ItemNotScored")
    assert "reference: is required" in together[1]["message"] and together[1]["rewards"] == {"geval-reward": None}


def test_a_process_reward_records_its_steps_as_metrics(outcomes, step_judge):
    """StepJudge: steps scored 0.9, 0.7, 0.5, reduced by min."""
    stepped = outcomes["process reward"]
    assert stepped["rewards"] == {"geval-reward": pytest.approx(0.5)}
    assert step_judge.requests[-1].steps.delimiter == "##"
    metrics = {k: v for k, v in stepped["metrics"].items() if "step" in k}
    assert metrics == {"geval-reward/steps": 3.0, "geval-reward/step_score_min": pytest.approx(0.5),
                       "geval-reward/step_score_mean": pytest.approx(0.7), "geval-reward/step_score/1": 0.9,
                       "geval-reward/step_score/2": 0.7, "geval-reward/step_score/3": 0.5}


def test_a_server_that_is_down_errors_the_trace(outcomes):
    down = outcomes["server down"]
    assert (down["error"], down["cause"]) == ("TaskError", "RewardServerError")
    assert "127.0.0.1:1" in down["message"] and down["rewards"] == {"geval-reward": None}


def test_an_answer_field_the_task_lacks_errors_the_trace(outcomes):
    missing = outcomes["no such field"]
    assert (missing["error"], missing["cause"]) == ("TaskError", "ValueError")
    assert "the task has no 'gold' field (answer_field)" in missing["message"]


def test_a_bad_setting_fails_when_the_config_is_read(outcomes):
    assert "mode: expected logprobs, sampling[:N] or reasoning[:MAX_TOKENS], got 'fast'" in outcomes["a bad mode"]


def test_vf_replay_plugs_the_judge_in_from_its_command_line(outcomes):
    scored, failed = outcomes["replay"]
    assert scored == {"rewards": {"geval-reward": {"score": pytest.approx(0.1), "weight": 1.0}}, "errors": []}
    assert failed["rewards"] == {"geval-reward": None}
    assert "ItemNotScored" in failed["errors"][0] and "reference: is required" in failed["errors"][0]


EXAMPLE = r"""
import runpy, sys
sys.path.insert(0, "training_examples")
sys.argv = ["verifiers_judge.py", "--server", sys.argv[1], "--prompts", "2", "--generations", "3"]
runpy.run_path("training_examples/verifiers_judge.py", run_name="__main__")
"""


def test_the_worked_example_scores_its_rollouts_in_one_call(tmp_path):
    """training_examples/verifiers_judge.py as documented, on its own scripted server: 2 tasks x 3 rollouts."""
    server = serve_in_process(ScriptedJudge())
    judge = next(server)
    try:
        paths = [installed("verifiers", VERSION)] + [installed(name, v) for name, v in VERIFIERS_IMPORTS]
        out = run_with(paths, EXAMPLE.replace("sys.argv[1]", repr(judge.address)), timeout=300)
    finally:
        next(server, None)
    assert out.count("group mean reward") == 2 and out.count("advantage") == 6, out
    assert [len(request.items) for request in judge.requests] == [6]
    assert all(item.reference for item in judge.requests[0].items)
