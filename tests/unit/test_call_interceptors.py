"""The call log and auth interceptors around a stand-in servicer (no engine): the
status each kind of call gets, and that the log records that same status. The real
server's cases are in tests/engine/test_bad_input.py."""

from __future__ import annotations

import asyncio
import json
import logging

import grpc
import pytest
from geval_client.pb import reward_pb2, reward_pb2_grpc
from geval_server.api.auth import AMBIGUOUS, DENIED, TokenAuthInterceptor
from geval_server.api.calls import CallInterceptor

SCORE = "/geval.reward.v1.RewardService/Score"
AUTH = (("authorization", "Bearer right"),)


class StandIn(reward_pb2_grpc.RewardServiceServicer):
    async def Score(self, request, context):
        if request.mode == 99:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "mode: unknown scoring mode 99")
        return reward_pb2.ScoreResponse(judge_model="stand-in")


CASES = [
    # name, method, request bytes, metadata, expected code, words in the details
    ("valid", SCORE, b"", AUTH, grpc.StatusCode.OK, ""),
    ("corrupt", SCORE, b"\xff\xff", AUTH, grpc.StatusCode.INVALID_ARGUMENT, "the wire format is corrupt"),
    ("bad UTF-8", SCORE, b"\x0a\x04\x12\x02\xff\xfe", AUTH, grpc.StatusCode.INVALID_ARGUMENT, "is not valid UTF-8"),
    ("bad UTF-8, its field named", SCORE,
     reward_pb2.ScoreRequest(items=[reward_pb2.Item(text="p", completion="ok"),
                                    reward_pb2.Item(text="p", completion="MARK")]).SerializeToString()
     .replace(b"MARK", b"\xff\xfeRK"), AUTH, grpc.StatusCode.INVALID_ARGUMENT,
     "items[1].completion: is not valid UTF-8"),
    ("refused by the service", SCORE, reward_pb2.ScoreRequest(mode=99).SerializeToString(), AUTH,
     grpc.StatusCode.INVALID_ARGUMENT, "unknown scoring mode 99"),
    ("no token", SCORE, b"\xff", (), grpc.StatusCode.UNAUTHENTICATED, DENIED),
    ("wrong token", SCORE, b"", (("authorization", "Bearer wrong"),), grpc.StatusCode.UNAUTHENTICATED, DENIED),
    ("the other key", SCORE, b"", (("authorization", "Bearer other"),), grpc.StatusCode.OK, ""),
    ("unknown method, no token", "/x.Y/Z", b"", (), grpc.StatusCode.UNAUTHENTICATED, DENIED),
    ("unknown method, token", "/x.Y/Z", b"", AUTH, grpc.StatusCode.UNIMPLEMENTED, "/x.Y/Z"),
    ("two headers", SCORE, b"", AUTH + (("authorization", "Bearer wrong"),), grpc.StatusCode.UNAUTHENTICATED,
     AMBIGUOUS),
    ("two equal headers", SCORE, b"", AUTH + AUTH, grpc.StatusCode.UNAUTHENTICATED, AMBIGUOUS),
]


async def call_all(cases) -> list[tuple[grpc.StatusCode, str]]:
    server = grpc.aio.server(interceptors=[CallInterceptor(), TokenAuthInterceptor(("right", "other"))])
    reward_pb2_grpc.add_RewardServiceServicer_to_server(StandIn(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    outcomes = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            for _, method, payload, metadata, _, _ in cases:
                call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
                try:
                    await call(payload, metadata=metadata, timeout=10)
                    outcomes.append((grpc.StatusCode.OK, ""))
                except grpc.RpcError as error:
                    outcomes.append((error.code(), error.details()))
    finally:
        await server.stop(0)
    return outcomes


def test_each_call_gets_its_status_and_is_logged_with_it(caplog):
    with caplog.at_level(logging.INFO, logger="geval_server.api.calls"):
        outcomes = asyncio.run(call_all(CASES))
    logged = [json.loads(record.getMessage()) for record in caplog.records if record.name == "geval_server.api.calls"]
    assert len(logged) == len(CASES)
    for (name, method, _, _, code, words), (got, details), line in zip(CASES, outcomes, logged):
        assert got == code, name
        assert words in details, name
        assert (line["method"], line["code"]) == (method, code.name), name


def test_an_empty_token_is_refused_at_start():
    with pytest.raises(ValueError):
        TokenAuthInterceptor(("",))
