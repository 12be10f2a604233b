"""The remote judge's pure parts: which remote reads a request, the completions requests and
their answers read back, and the serve flags checked (the engine itself is tested against a
real vLLM server in tests/engine/test_remote_judge.py)."""

from __future__ import annotations

import argparse

import pytest
from geval_server.engine.remote import completions
from geval_server.engine.remote.balance import NoRemoteUp, Spread
from geval_server.engine.remote.config import API_KEY_ENV
from geval_server.engine.remote.flags import add_remote_flags, remote_config


def test_a_prompts_reads_stay_on_one_remote_and_new_prompts_go_to_the_least_busy():
    spread = Spread(2)
    first = spread.take("group a", [True, True])
    assert spread.take("group a", [True, True]) == first  # busier, still the same remote
    other = spread.take("group b", [True, True])
    assert other != first
    spread.give_back(first)
    spread.give_back(first)
    assert spread.take(None, [True, True]) == first  # no key: the least busy


def test_a_key_moves_off_a_remote_that_is_down_and_none_up_raises():
    spread = Spread(2)
    first = spread.take("group a", [True, True])
    moved = spread.take("group a", [r != first for r in range(2)])
    assert moved != first
    assert spread.take("group a", [True, True]) == moved  # it stays where it moved
    with pytest.raises(NoRemoteUp):
        spread.take("group a", [False, False])


def test_remembered_keys_are_bounded():
    spread = Spread(2, remembered=2)
    for key in "abc":
        spread.take(key, [True, True])
    assert len(spread._remote_of) == 2


def _answer(top: dict[str, float]) -> dict:
    return {"choices": [{"index": 0, "text": "4", "logprobs": {"top_logprobs": [top]}}]}


def test_a_slot_answer_reads_tokens_by_id_and_leaves_out_those_absent():
    answer = _answer({"token_id:33": -0.1, "token_id:34": -2.5, "token_id:7": -9999.0})
    assert completions.slot_answer(answer, [33, 34, 35]) == {33: -0.1, 34: -2.5}
    assert completions.names_token_ids(answer)
    assert not completions.names_token_ids(_answer({" 4": -0.1}))
    with pytest.raises(completions.AnswerError, match="top_logprobs"):
        completions.slot_answer({"choices": [{"logprobs": None}]}, [33])


def test_requests_carry_token_ids_and_the_read_asked_for():
    body = completions.token_ids_read("judge", [1, 2], [33, 34])
    assert body["prompt"] == [1, 2] and body["logprob_token_ids"] == [33, 34] and body["logprobs"] == 1
    assert body["return_tokens_as_token_ids"] and body["max_tokens"] == 1 and body["temperature"] == 0.0
    assert completions.top_k_read("judge", [1], 20)["logprobs"] == 20
    assert completions.sample_request("judge", [1], 3, 1.0, 5, None).keys() >= {"n", "temperature"}
    assert "seed" not in completions.sample_request("judge", [1], 3, 1.0, 5, None)
    assert completions.generate_request("judge", [1], 5, ["\n"], 0.0)["return_token_ids"]


def test_prompt_logprobs_are_read_for_the_tail():
    answer = {"choices": [{"prompt_logprobs": [None, {"5": {"logprob": -1.0}}, {"6": {"logprob": -2.0}}]}]}
    assert completions.prompt_answer(answer, [4, 5, 6], 2) == [-1.0, -2.0]
    with pytest.raises(completions.AnswerError, match="prompt_logprobs"):
        completions.prompt_answer({"choices": [{"prompt_logprobs": None}]}, [4, 5, 6], 1)


def test_a_generation_needs_its_token_ids():
    body = {"choices": [{"text": "ok", "token_ids": [5, 6], "finish_reason": "length"}]}
    assert completions.generation(body, ()) == ("ok", [5, 6], True)
    with pytest.raises(completions.AnswerError, match="token_ids"):
        completions.generation({"choices": [{"text": "ok", "token_ids": None}]}, ())


def test_stop_strings_past_the_remotes_limit_are_applied_here():
    stops = ("A", "B", "C", "D", "Score:", "[RESULT]")
    assert completions.generate_request("judge", [1], 5, stops, 0.0)["stop"] == ["A", "B", "C", "D"]
    body = {"choices": [{"text": "fine. Score: 4 [RESULT] 4", "token_ids": [5, 6, 7], "finish_reason": "length"}]}
    assert completions.generation(body, stops) == ("fine. ", [5, 6, 7], False)
    assert completions.generation(body, stops[:4])[0] == "fine. Score: 4 [RESULT] 4"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


def _config(argv: list[str], engine_args: dict | None = None):
    parser = _Parser()
    add_remote_flags(parser)
    return remote_config(parser.parse_args(argv), "my/judge", engine_args or {}, parser)


def test_the_flags_give_a_remote_config(tmp_path, monkeypatch):
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    assert _config([]) is None
    key = tmp_path / "key"
    key.write_text("secret\n")
    config = _config(["--judge-url", "http://127.0.0.1:8000/v1/", "--judge-url", "http://127.0.0.1:8001/v1",
                      "--judge-api-key-file", str(key)], {"tokenizer": "my/tokenizer"})
    assert config.urls == ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1")
    assert config.served_model == "my/judge" and config.api_key == "secret"
    monkeypatch.setenv(API_KEY_ENV, "from-env")
    assert _config(["--judge-url", "http://127.0.0.1:8000/v1"]).api_key == "from-env"
    with pytest.raises(ValueError, match=f"--judge-api-key-file and {API_KEY_ENV}"):
        _config(["--judge-url", "http://127.0.0.1:8000/v1", "--judge-api-key-file", str(key)])


@pytest.mark.parametrize("argv, engine_args, named", [
    (["--judge-url", "127.0.0.1:8000"], {}, "--judge-url"),
    (["--judge-url", "http://h:1/v1"], {"dtype": "float32"}, "--dtype"),
    (["--judge-url", "http://h:1/v1", "--judge-top-k", "0"], {}, "--judge-top-k"),
    (["--judge-url", "http://h:1/v1", "--judge-max-connections", "0"], {}, "--judge-max-connections"),
    (["--judge-url", "http://h:1/v1", "--judge-timeout-s", "0"], {}, "--judge-timeout-s"),
    (["--judge-url", "http://h:1/v1", "--judge-retries", "-1"], {}, "--judge-retries"),
    (["--judge-model-name", "x"], {}, "--judge-model-name needs --judge-url"),
])
def test_bad_flags_are_named(argv, engine_args, named):
    with pytest.raises(ValueError, match=named):
        _config(argv, engine_args)


def _likelihood_files(tmp_path):
    from geval_server.scorers.geval.rubrics import rubric_files

    own = tmp_path / "mine.toml"
    own.write_text('kind = "likelihood"\nname = "likelihood-mine"\ncriterion = "Overall"\n'
                   'instruction = "Summary of the article above:"\n')
    return rubric_files([]), rubric_files([own])


def test_without_prompt_logprobs_the_likelihood_presets_are_left_out_and_ones_asked_for_refuse_the_start(tmp_path):
    from geval_server.scorers.base import Unservable
    from geval_server.scorers.likelihood.kind import without_likelihood
    from geval_server.scorers.likelihood.spec import load_specs

    presets, with_mine = _likelihood_files(tmp_path)
    assert without_likelihood(load_specs(presets), presets, "overall-quality", "no prompt_logprobs") == {}
    with pytest.raises(Unservable, match="likelihood-summary.*no prompt_logprobs"):
        without_likelihood(load_specs(presets), presets, "likelihood-summary", "no prompt_logprobs")
    with pytest.raises(Unservable, match="likelihood-mine"):
        without_likelihood(load_specs(with_mine), with_mine, "overall-quality", "no prompt_logprobs")


class _Engine:
    role = "the judge"

    def __init__(self, recovers: bool) -> None:
        self.recovers, self.is_running = recovers, True


def test_health_follows_an_engine_that_recovers_and_one_that_cannot_ends_the_server(monkeypatch):
    import asyncio

    from geval_server import server
    from grpc_health.v1 import health, health_pb2

    monkeypatch.setattr(server, "ENGINE_WATCH_INTERVAL_S", 0.01)

    class Judge:
        def __init__(self, engines):
            self.engines = engines

    async def status(servicer):
        request = health_pb2.HealthCheckRequest(service="")
        return (await servicer.Check(request, None)).status

    async def scenario():
        remote, local = _Engine(recovers=True), _Engine(recovers=False)
        servicer, died = health.aio.HealthServicer(), asyncio.Event()
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        watcher = asyncio.create_task(server._watch_engine(Judge([remote, local]), died, servicer))
        seen = []
        for running in (False, True):
            remote.is_running = running
            await asyncio.sleep(0.1)
            seen.append(await status(servicer))
        assert not died.is_set()
        local.is_running = False
        await asyncio.wait_for(died.wait(), 5)
        await watcher
        return seen

    assert asyncio.run(scenario()) == [health_pb2.HealthCheckResponse.NOT_SERVING,
                                       health_pb2.HealthCheckResponse.SERVING]
