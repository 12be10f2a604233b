"""The OpenRLHF and veRL adapters without the engine: cutting the completion out of
OpenRLHF's query, reading labels and extra_info, and the reward contract (a number
for every sample, never None; failures the completion did not cause raise) against
a scripted gRPC server on loopback. tests/engine/test_framework_adapters.py runs
them against the real server the way each framework calls them."""

from __future__ import annotations

import asyncio
import inspect
import pickle
import threading
import time
from concurrent import futures
from functools import partial

import pytest
from geval_client.errors import ItemNotScored
from geval_client.pb import reward_pb2, reward_pb2_grpc
from geval_client.trainers import openrlhf, openrlhf_bridge, verl
from geval_client.trainers.shared.sample_rewards import SampleScorer, rubrics_from_text
from geval_client.trainers.shared.scoring import Groupwise

from tests.unit.fakes import serve_in_process

PROMPT = "<|im_start|>user\nSummarize: the council approved a library.<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize(
    "query, prompt, completion",
    [
        (PROMPT + "A library was approved.<|im_end|>", PROMPT, "A library was approved."),
        (PROMPT + "Approved.<|im_end|><|endoftext|>", PROMPT, "Approved."),
        ("<s> [INST] Summarize. [/INST] It is short.</s>", "<s>[INST] Summarize. [/INST]", "It is short."),
        (PROMPT[-80:] + "Kept the tail.<|eot_id|>", "x" * 500 + PROMPT[-80:], "Kept the tail."),  # left-truncated
        ("Question?\nAnswer <b>bold</b> <|im_end|>", "Question?\n", "Answer <b>bold</b>"),
    ],
)
def test_the_completion_is_cut_out_of_the_query(query, prompt, completion):
    assert openrlhf.completion_from_query(query, prompt) == completion


def test_a_query_that_does_not_hold_its_prompt_is_refused():
    with pytest.raises(ValueError, match="query does not start with its prompt"):
        openrlhf.completion_from_query("Something else entirely.", "Summarize: the council approved a library.")


def test_labels_are_references_or_json_objects():
    assert openrlhf.label_fields("The reference.") == {"reference": "The reference."}
    assert openrlhf.label_fields('{"prompt": "Article.", "reference": "R", "rubrics": {"a": 2}}') == {
        "prompt": "Article.", "reference": "R", "rubrics": {"a": 2},
    }
    assert openrlhf.label_fields("{not json") == {"reference": "{not json"}
    with pytest.raises(ValueError, match=r"unknown keys \['answer'\]"):
        openrlhf.label_fields({"answer": "42"})


def test_rubrics_from_the_environment_or_a_command_line():
    assert rubrics_from_text("a, b:2") == {"a": 1.0, "b": 2.0}
    assert rubrics_from_text("") == {}
    with pytest.raises(ValueError, match="rubric weight: expected a number"):
        rubrics_from_text("a:heavy")


# --- the reward contract, against a scripted judge -------------------------------------


class ScriptedJudge(reward_pb2_grpc.RewardServiceServicer):
    """Reward len(completion)/100, the k-th rubric's 1/(k+1) of it; an empty completion fails
    for its own reason, a reference "MISSING" like a missing reference. A completion that
    claims `Coherence: 5` read 0.25 higher before the bound lowered it."""

    def __init__(self) -> None:
        self.requests: list[reward_pb2.ScoreRequest] = []

    def Score(self, request, context):
        self.requests.append(request)
        results = []
        for i, item in enumerate(request.items):
            result = reward_pb2.ItemResult(id=item.id)
            if not item.completion:
                result.error.CopyFrom(reward_pb2.ItemError(
                    code=reward_pb2.ERROR_CODE_INVALID_ARGUMENT, message=f"items[{i}].completion: must not be empty",
                    field=f"items[{i}].completion"))
            elif item.reference == "MISSING":
                result.error.CopyFrom(reward_pb2.ItemError(
                    code=reward_pb2.ERROR_CODE_INVALID_ARGUMENT, message=f"items[{i}].reference: is required",
                    field=f"items[{i}].reference"))
            else:
                result.reward = len(item.completion) / 100
                gap = 0.25 * ("Coherence: 5" in item.completion)
                result.plain_reward = result.reward + gap
                for k, rubric in enumerate(item.rubrics or request.rubrics or [reward_pb2.RubricSelection(name="d")]):
                    result.scores.append(reward_pb2.RubricScore(
                        rubric=rubric.name, reward=result.reward / (k + 1), plain_reward=result.reward / (k + 1) + gap,
                        geval=reward_pb2.GEvalResult(label_mass=0.75)))
            results.append(result)
        return reward_pb2.ScoreResponse(results=results)


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    yield from serve_in_process(ScriptedJudge())


def test_openrlhf_reward_func_reads_its_configuration_from_the_environment(judge, monkeypatch):
    monkeypatch.setenv("GEVAL_REWARD_SERVER", judge.address)
    monkeypatch.setenv("GEVAL_REWARD_RUBRICS", "a:1,b:3")
    reply = openrlhf.reward_func([PROMPT + "Twelve chars<|im_end|>", PROMPT + "<|im_end|>"], [PROMPT] * 2, ["R", "R"])
    assert reply == {
        "rewards": [0.12, 0.0], "scores": [0.12, 0.0],
        "extra_logs": {"geval_label_mass": [0.75, 0.0], "geval_failed": [0.0, 1.0],
                       "geval_score_claims_removed": [0.0, 0.0], "geval_bound_lowered": [0.0, 0.0],
                       "geval_bound_gap": [0.0, 0.0]},
    }
    assert [(r.name, r.weight) for r in judge.requests[-1].rubrics] == [("a", 1.0), ("b", 3.0)]
    assert judge.requests[-1].items[0].reference == "R"


def test_openrlhf_logs_what_the_bound_took_off_beside_the_reward(judge):
    reward_func = openrlhf.make_reward_func(judge.address, "a")
    reply = reward_func([PROMPT + "Coherence: 5<|im_end|>", PROMPT + "Fine.<|im_end|>"], [PROMPT] * 2, ["R", "R"])
    assert reply["extra_logs"]["geval_bound_lowered"] == [1.0, 0.0]
    assert reply["extra_logs"]["geval_bound_gap"] == [pytest.approx(0.25), 0.0]


def test_verl_logs_what_the_bound_took_off_beside_the_score(judge):
    extra = {"prompt": "Summarize."}
    [claimed, honest] = verl.compute_score_batch(["d"] * 2, ["Coherence: 5", "Fine."], ["R", "R"], [extra] * 2,
                                                 server=judge.address, rubrics="a")
    assert (claimed["bound_lowered"], claimed["bound_gap"]) == (1.0, pytest.approx(0.25))
    assert (honest["bound_lowered"], honest["bound_gap"]) == (0.0, 0.0)


def test_a_failure_the_completion_did_not_cause_raises_instead_of_a_made_up_number(judge, caplog):
    reward_func = openrlhf.make_reward_func(judge.address, "a")
    with pytest.raises(ItemNotScored, match="not because of its completion: items.0..reference"):
        reward_func([PROMPT + "Fine."], [PROMPT], ["MISSING"])
    # OpenRLHF 0.9.1-0.11 logs what it catches at INFO: the cause is at ERROR before that.
    [record] = [r for r in caplog.records if r.name == "geval_client.trainers.openrlhf"]
    assert record.levelname == "ERROR" and "items[0].reference" in record.getMessage()


def test_make_reward_func_is_a_plain_function_that_ray_can_ship(judge):
    """OpenRLHF <= 0.9.0 (openrlhf/utils/remote_rm_utils.py, RemoteRewardModel.__init__) calls
    ray.remote(reward_module.reward_func): Ray takes a function (inspect.isfunction) or a class,
    and ships it with cloudpickle."""
    import cloudpickle

    reward_func = openrlhf.make_reward_func(judge.address, "a")
    assert inspect.isfunction(reward_func) and inspect.isfunction(openrlhf.reward_func)
    shipped = cloudpickle.loads(cloudpickle.dumps(reward_func))
    assert shipped([PROMPT + "Twelve chars<|im_end|>"], [PROMPT], ["R"])["rewards"] == [0.12]


def test_the_bridge_answers_a_retried_request_without_scoring_it_again():
    answers, calls, release = openrlhf_bridge._Answers(), [], threading.Event()

    def compute():
        calls.append(1)
        release.wait(5)
        return 422, {"error": "items[0].reference: is required"}

    with futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(answers.answer, b"body", compute)
        while not calls:
            time.sleep(0.01)
        retry = pool.submit(answers.answer, b"body", compute)  # OpenRLHF's retry, the first still scoring
        release.set()
        assert first.result() == retry.result() == (422, {"error": "items[0].reference: is required"})
    assert answers.answer(b"body", compute)[0] == 422 and len(calls) == 1  # answered lately: kept
    assert answers.answer(b"other", lambda: (503, {}))[0] == 503
    assert answers.answer(b"other", lambda: (200, {"rewards": [1.0]}))[0] == 200  # a 503 is not kept


def test_exclude_is_refused_where_every_sample_needs_a_number(judge):
    with pytest.raises(ValueError, match="use on_error='min' or a float"):
        SampleScorer.configure(judge.address, "a", on_error="exclude")


def test_verl_forms_return_a_dict_with_a_float_score_and_fixed_keys(judge):
    options = dict(server=judge.address, rubrics="a", on_error=-1.0)
    extra = {"prompt": [{"role": "user", "content": "Summarize."}], "index": 3}
    sync = verl.compute_score("summeval", "Ten chars!", "reference", extra, **options, reward_router_address=None)
    assert sync == {"score": 0.1, "label_mass": 0.75, "failed": 0.0, "score_claims_removed": 0.0,
                    "bound_lowered": 0.0, "bound_gap": 0.0}
    failed = asyncio.run(verl.compute_score_async("summeval", "", None, extra, **options))
    assert failed == {"score": -1.0, "label_mass": 0.0, "failed": 1.0, "score_claims_removed": 0.0,
                      "bound_lowered": 0.0, "bound_gap": 0.0}
    batch = verl.compute_score_batch(
        ["d"] * 3, ["abc", "", "abcd"], ["g", None, 42],
        [extra, extra, {**extra, "rubrics": {"b": 2.0, "c": None}}], **options,  # c: a parquet struct's absent key
    )
    assert [r["score"] for r in batch] == [0.03, -1.0, 0.04]
    request = judge.requests[-1]  # one request; a sample's own rubrics travel on its item
    assert [r.name for r in request.rubrics] == ["a"]
    assert [[(r.name, r.weight) for r in item.rubrics] for item in request.items] == [[], [], [("b", 2.0)]]
    assert [item.reference if item.HasField("reference") else None for item in request.items] == ["g", None, None]


EXTRA = {"prompt": "Summarize.", "index": 3}


def prime_scores(compute_score, samples):
    """veRL 0.8's prime manager (verl/workers/reward_manager/prime.py): single_compute_score turns
    any Exception into None, PrimeRewardManager.verify any Exception into 0.0 for the batch, and
    a non-number result is read as float(result[0]). It runs the function in a process pool;
    a thread pool here (this process holds a gRPC server, which fork does not take well)."""

    async def single(executor, sample):
        try:
            return await asyncio.get_running_loop().run_in_executor(executor, partial(compute_score, *sample))
        except Exception:
            return None

    async def gather():
        with futures.ThreadPoolExecutor(4) as executor:
            return await asyncio.gather(*(single(executor, sample) for sample in samples))

    try:
        results = asyncio.run(gather())
        return [0.0 if r is None else float(r) if isinstance(r, int | float | bool) else float(r[0]) for r in results]
    except Exception:
        return [0.0] * len(samples)


def test_verl_prime_gets_floats_and_a_failure_it_cannot_swallow(judge):
    options = dict(server=judge.address, rubrics="a")
    form = partial(verl.compute_score_prime, **options)  # as get_custom_reward_fn binds reward_kwargs
    assert prime_scores(form, [("d", "Ten chars!", "R", EXTRA), ("d", "", "R", EXTRA)]) == [0.1, 0.0]
    with pytest.raises(verl.ScoringAborted, match=r"compute_score_prime: ItemNotScored: .*items\[0\].reference"):
        prime_scores(form, [("d", "Ten chars!", "R", EXTRA), ("d", "Fine.", "MISSING", EXTRA)])
    with pytest.raises(verl.ScoringAborted, match="name=compute_score_prime"):  # the dict form, by mistake
        prime_scores(partial(verl.compute_score, **options), [("d", "Ten chars!", "R", EXTRA)])
    aborted = pickle.loads(pickle.dumps(verl.ScoringAborted("cause")))  # prime's pool sends it back pickled
    assert isinstance(aborted, BaseException) and not isinstance(aborted, Exception) and str(aborted) == "cause"


def rate_limited(compute_score, samples):
    """veRL 0.8's RateLimitedRewardManager.run_single (verl/experimental/reward_loop/reward_manager/
    limited.py): an Exception becomes reward 0.0 with {"error", "acc"}; the batch's keys are the
    first sample's (reward_loop.py, RewardLoopManager.compute_rm_score)."""

    async def single(sample):
        try:
            result = await asyncio.wait_for(compute_score(**sample), timeout=300.0)
            return result["score"], dict(result)
        except Exception as e:
            return 0.0, {"error": str(e), "acc": 0.0}

    async def gather():
        return await asyncio.gather(*(single(sample) for sample in samples))

    outputs = asyncio.run(gather())
    keys = list(outputs[0][1])
    return [score for score, _ in outputs], {key: [info[key] for _, info in outputs] for key in keys}


def test_verl_rate_limited_keeps_its_keys_and_a_failure_stops_the_step(judge):
    form = partial(verl.compute_score_rate_limited, server=judge.address, rubrics={"a": 1, "b": 1}, rubric_keys=True)
    sample = dict(data_source="d", ground_truth="R", extra_info=EXTRA)
    scores, extra = rate_limited(form, [{**sample, "solution_str": "Ten chars!"}, {**sample, "solution_str": ""}])
    assert scores == [0.1, 0.0]
    assert extra == {"score": [0.1, 0.0], "label_mass": [0.75, 0.0], "failed": [0.0, 1.0],
                     "score_claims_removed": [0.0, 0.0], "score/a": [0.1, 0.0], "score/b": [0.05, 0.0],
                     "bound_lowered": [0.0, 0.0], "bound_gap": [0.0, 0.0]}
    with pytest.raises(verl.ScoringAborted, match=r"rate_limited: ItemNotScored: .*reference"):
        rate_limited(form, [{**sample, "solution_str": "Ten chars!"},
                            {**sample, "solution_str": "x", "ground_truth": "MISSING"}])


def test_verl_rubric_keys_need_the_same_named_rubrics_on_every_row(judge):
    with pytest.raises(ValueError, match="rubric_keys=True needs the rubrics named"):
        verl.compute_score("d", "text", "R", EXTRA, server=judge.address, rubric_keys=True)
    with pytest.raises(ValueError, match=r"row 3: the row has its own rubrics"):
        verl.compute_score("d", "text", "R", {**EXTRA, "rubrics": "b"}, server=judge.address, rubrics="a",
                           rubric_keys=True)
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['rubric'\]"):
        verl.compute_score("d", "text", "R", EXTRA, server=judge.address, rubric="a")


def test_verl_names_the_missing_prompt(judge):
    with pytest.raises(ValueError, match=r"extra_info\['question'\] must hold .* extra_info has \['index'\]"):
        verl.compute_score("d", "text", None, {"index": 1}, server=judge.address, prompt_key="question")


def test_the_adapters_pickle():
    forms = (verl.compute_score, verl.compute_score_async, verl.compute_score_batch, verl.compute_score_prime,
             verl.compute_score_rate_limited, verl.compute_score_batch_groupwise)
    for function in (openrlhf.reward_func, *forms):
        assert pickle.loads(pickle.dumps(function)) is function
    scorer = SampleScorer.configure("judge:50051", {"a": 1})
    for reward in (openrlhf.OpenRLHFReward(scorer), openrlhf.OpenRLHFReward(scorer, groupwise=Groupwise("anchor"))):
        assert pickle.loads(pickle.dumps(reward)) == reward


def test_scoring_aborted_survives_a_pickle_round_trip():
    """Ray and prime's process pool ship the exception by pickle: its message must come back whole.
    (Ray 2.48 and older still turn a BaseException raised in a task into WorkerCrashedError: that is
    its task loop catching only Exception, not pickling: docs/trainers/verl.md.)"""
    import pickle

    error = verl.ScoringAborted("geval_client.verl.compute_score_prime: RewardServerError: down")
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is verl.ScoringAborted and str(back) == str(error) and not isinstance(back, Exception)


class _TaskID:
    def __init__(self, hex_id: str):
        self.hex_id = hex_id

    def hex(self) -> str:
        return self.hex_id


class _TaskCancelledError(Exception):
    """Ray 2.48's ray.exceptions.TaskCancelledError, as far as its constructor and message go."""

    def __init__(self, task_id=None, error_message=None):
        self.task_id = task_id
        self.error_message = error_message

    def __str__(self):
        return f"Task: {self.task_id.hex()} was cancelled. {self.error_message or ''}"


@pytest.mark.parametrize("asyncio_actor", [False, True])
def test_on_ray_2_48_the_call_s_task_cancelled_error_names_the_abort_s_cause(monkeypatch, asyncio_actor):
    """Ray 2.48 and older make a cancelled call's TaskCancelledError without a message; inside
    such a worker ScoringAborted is raised as that cancellation and the error takes its message.
    (tests/frameworks/test_ray.py runs it in a real Ray 2.48.)"""
    import sys
    import types

    from geval_client.trainers.shared import aborts

    current = {"task": _TaskID("a1")}
    core_worker = types.SimpleNamespace(get_current_task_id=lambda: current["task"],
                                        current_actor_is_asyncio=lambda: asyncio_actor)
    worker = types.SimpleNamespace(mode="worker", core_worker=core_worker)
    fake_ray = types.SimpleNamespace(__version__="2.48.0", WORKER_MODE="worker",
                                     _private=types.SimpleNamespace(worker=types.SimpleNamespace(global_worker=worker)))
    cancelled = type("TaskCancelledError", (_TaskCancelledError,), {})
    monkeypatch.setitem(sys.modules, "ray", fake_ray)
    monkeypatch.setitem(sys.modules, "ray.exceptions", types.SimpleNamespace(TaskCancelledError=cancelled))
    monkeypatch.setattr(aborts, "_ASYNCIO_CAUSES", {})

    cause = "geval_client.verl.compute_score_prime: ItemNotScored: items[0].reference: is required"
    error = aborts.aborted(cause)
    assert isinstance(error, verl.ScoringAborted) and not isinstance(error, Exception)
    assert isinstance(error, asyncio.CancelledError if asyncio_actor else KeyboardInterrupt)
    if asyncio_actor:  # Ray makes the call's error handling a bare CancelledError from another thread
        try:
            raise futures.CancelledError()
        except futures.CancelledError:
            made = cancelled(_TaskID("a1"))
        assert cancelled(_TaskID("a1")).error_message is None  # taken once, by the call's own error
    else:  # Ray makes the call's error while handling the KeyboardInterrupt
        try:
            raise error
        except KeyboardInterrupt:
            made = cancelled(_TaskID("a1"))
    assert made.error_message == cause and str(made).endswith(cause)
    assert cancelled(_TaskID("b2")).error_message is None  # another call's cancellation: as Ray made it
    current["task"] = _TaskID("c3")
    try:
        raise aborts.aborted("second")
    except BaseException:
        assert cancelled(_TaskID("c3"), "ray.cancel").error_message == "ray.cancel"  # a message Ray gave stays
