"""A judge that cannot score fails the server's start (probe_judge), and a bug in a call
is answered INTERNAL and logged as INTERNAL, never as OK (pure logic over the fake
judge; the real server refuses an undrivable judge in tests/families/test_served_families.py)."""

import asyncio
import json
import logging

import grpc
import pytest
from geval_client import make_item
from geval_client.pb import reward_pb2_grpc
from geval_client.requests import score_request
from geval_server.api.calls import CallInterceptor
from geval_server.api.servicer import RewardService
from geval_server.api.wire import Limits
from geval_server.server import JudgeStartError, probe_judge

from tests.unit.fakes import fake_judge

RUBRIC = "summeval-coherence"


def test_a_judge_that_scores_the_probe_item_starts():
    judge, engine, _ = fake_judge([RUBRIC])
    asyncio.run(probe_judge(judge, RUBRIC))
    assert len(engine.prompts) == 2  # as written, and masked: its `4` is not the source's


def test_a_judge_whose_engine_fails_every_request_is_refused_at_start_naming_the_error():
    judge, engine, _ = fake_judge([RUBRIC])

    async def broken(prompt_ids, token_ids, *, affinity=None):
        raise ValueError("the tokenizer does not support return_offsets_mapping")

    engine.token_logprobs = broken
    with pytest.raises(JudgeStartError, match=r"rubric 'summeval-coherence' failed \(INTERNAL\): .*ValueError: the "
                                              r"tokenizer does not support return_offsets_mapping"):
        asyncio.run(probe_judge(judge, RUBRIC))


def test_an_unexpected_exception_in_a_call_is_answered_internal_and_logged_internal(caplog):
    judge, _, _ = fake_judge([RUBRIC])

    async def bug(*args, **kwargs):
        raise KeyError("a bug")

    judge.score = bug
    service = RewardService(judge, RUBRIC, {}, Limits(), max_pending_items=100, low_confidence_below=0.5)
    request = score_request([make_item("Q?", "A.")], None)

    async def call():
        # as the server runs it: the call log (CallInterceptor) around the servicer
        server = grpc.aio.server(interceptors=[CallInterceptor()])
        reward_pb2_grpc.add_RewardServiceServicer_to_server(service, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                await reward_pb2_grpc.RewardServiceStub(channel).Score(request, timeout=10)
        finally:
            await server.stop(0)

    with caplog.at_level(logging.INFO), pytest.raises(grpc.RpcError) as aborted:
        asyncio.run(call())
    code, details = aborted.value.code(), aborted.value.details()
    assert code is grpc.StatusCode.INTERNAL and "KeyError" in details and "a bug" in details
    calls = [json.loads(r.getMessage()) for r in caplog.records if r.getMessage().startswith("{")]
    assert [call["code"] for call in calls] == ["INTERNAL"]  # one line per call, with the status it got
    assert calls[0]["items"] == 1 and calls[0]["call_id"]  # the servicer's fields in that line
    assert any(r.levelno == logging.ERROR and r.exc_info for r in caplog.records)
