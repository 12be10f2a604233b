"""Bad input, every case a clean status, through a real server with a token
(hostile and malformed input): requests are sent as raw bytes where the client library would refuse
to build them, and the server's log must show each call with the code it got."""

from __future__ import annotations

import json

import grpc
import pytest
from geval_client import make_item
from geval_client.pb import reward_pb2
from geval_server.api.auth import AMBIGUOUS, DENIED
from geval_server.launcher import start_server, stop_server
from grpc_health.v1 import health_pb2, health_pb2_grpc

pytestmark = pytest.mark.engine  # starts a server of its own

KEY = "bad-input-key-93d2"
AUTH = (("authorization", f"Bearer {KEY}"),)
SCORE = "/geval.reward.v1.RewardService/Score"
MARKER = "MARKERMARKER"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log_path = tmp_path_factory.mktemp("bad-input") / "server.log"
    process, address = start_server(log_path, "--api-key", KEY, "--no-semscore", "--kv-cache-memory-bytes", "1G")
    try:
        yield address, log_path
    finally:
        stop_server(process)


@pytest.fixture
def channel(server):
    with grpc.insecure_channel(server[0]) as open_channel:
        yield open_channel


def raw_call(channel, method: str, payload: bytes, metadata=AUTH) -> grpc.RpcError:
    """Sends `payload` as the request's bytes; returns the error the call ended with."""
    call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.RpcError) as error:
        call(payload, metadata=metadata, timeout=60)
    return error.value


def score_request_bytes(**fields) -> bytes:
    return reward_pb2.ScoreRequest(items=[make_item("What is 2+2?", MARKER)], **fields).SerializeToString()


def logged_calls(log_path) -> list[dict]:
    return [json.loads(line.split(": ", 1)[1]) for line in log_path.read_text().splitlines()
            if "geval_server.api.calls: {" in line]


def test_a_corrupt_protobuf_is_invalid_argument_naming_the_problem(channel):
    error = raw_call(channel, SCORE, b"\xff\xff\xff\xff")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "geval.reward.v1.ScoreRequest" in error.details() and "corrupt" in error.details()


def test_invalid_utf8_in_a_string_field_is_invalid_argument_naming_the_problem(channel):
    payload = score_request_bytes().replace(MARKER.encode(), b"\xff\xfe" + MARKER.encode()[2:])
    error = raw_call(channel, SCORE, payload)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "UTF-8" in error.details()


def test_an_undefined_enum_value_is_refused(channel):
    error = raw_call(channel, SCORE, score_request_bytes(mode=99))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown scoring mode 99" in error.details()


def test_a_huge_rubric_name_is_echoed_cut_short(channel):
    name = "x" * 100_000
    error = raw_call(channel, SCORE, score_request_bytes(rubrics=[reward_pb2.RubricSelection(name=name)]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown rubric" in error.details() and "(100000 characters)" in error.details()
    assert len(error.details()) < 2000


def test_a_well_formed_call_still_scores(channel):
    call = channel.unary_unary(SCORE, request_serializer=None, response_deserializer=None)
    reply = reward_pb2.ScoreResponse.FromString(call(score_request_bytes(), metadata=AUTH, timeout=300))
    assert reply.results[0].scores and not reply.results[0].HasField("error")


def test_no_method_discovery_without_the_token(channel):
    error = raw_call(channel, "/geval.reward.v1.RewardService/NoSuchMethod", b"", metadata=())
    assert (error.code(), error.details()) == (grpc.StatusCode.UNAUTHENTICATED, DENIED)
    # Without the token a corrupt body is not read either: the refusal comes first.
    error = raw_call(channel, SCORE, b"\xff\xff", metadata=())
    assert (error.code(), error.details()) == (grpc.StatusCode.UNAUTHENTICATED, DENIED)
    # With it, the caller learns the method does not exist.
    error = raw_call(channel, "/geval.reward.v1.RewardService/NoSuchMethod", b"")
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "NoSuchMethod" in error.details()


def test_two_authorization_headers_are_refused_as_ambiguous(channel):
    for pair in [(("authorization", "Bearer wrong"), AUTH[0]), (AUTH[0], ("authorization", "Bearer wrong")),
                 (AUTH[0], AUTH[0])]:
        error = raw_call(channel, SCORE, score_request_bytes(), metadata=pair)
        assert (error.code(), error.details()) == (grpc.StatusCode.UNAUTHENTICATED, AMBIGUOUS)


def test_health_stays_open(channel):
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_every_call_is_logged_with_its_real_code(server, channel):
    raw_call(channel, SCORE, b"\xff\xff\xff\xff")
    raw_call(channel, "/geval.reward.v1.RewardService/NoSuchMethod", b"", metadata=())
    raw_call(channel, "/geval.reward.v1.RewardService/NoSuchMethod", b"")
    raw_call(channel, SCORE, score_request_bytes(mode=99))
    codes = {(line["method"].rsplit("/", 1)[-1], line["code"]) for line in logged_calls(server[1])}
    assert {("Score", "INVALID_ARGUMENT"), ("NoSuchMethod", "UNAUTHENTICATED"), ("NoSuchMethod", "UNIMPLEMENTED"),
            ("Score", "OK")} <= codes
    assert all(line["code"] != "UNKNOWN" for line in logged_calls(server[1]))
