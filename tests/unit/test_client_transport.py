"""The client's transport: retries and backoff, round_robin over several servers,
TLS (one-way and mutual) and the bearer token. These are about the wire, not the
judge, so they run against small scripted gRPC servers on loopback."""

from __future__ import annotations

import asyncio
import json
import pickle
import shutil
import subprocess
from concurrent import futures

import grpc
import pytest
from geval_client import AsyncRewardClient, RetryPolicy, RewardClient, RewardServerError, TLSOptions
from geval_client.pb import reward_pb2, reward_pb2_grpc
from geval_client.transport import auth_metadata, channel_spec

PORTS = range(50210, 50290)  # this suite's share of the project's ports
FAST_RETRY = RetryPolicy(attempts=4, initial_backoff_s=0.01, max_backoff_s=0.05, wait_for_server_s=0)
ITEM = {"prompt": "Question?", "completion": "Answer."}


class ScriptedService(reward_pb2_grpc.RewardServiceServicer):
    """Fails Score with the scripted status codes in turn, then answers; records each call's metadata."""

    def __init__(self, name: str, failures=()) -> None:
        self.name = name
        self.failures = list(failures)
        self.metadata: list[dict[str, str]] = []

    def Score(self, request, context):
        self.metadata.append(dict(context.invocation_metadata()))
        if self.failures:
            code = self.failures.pop(0)
            context.abort(code, f"scripted {code.name}")
        results = [reward_pb2.ItemResult(id=item.id, reward=0.5) for item in request.items]
        return reward_pb2.ScoreResponse(results=results, judge_model=self.name)


def serve(service, credentials: grpc.ServerCredentials | None = None) -> tuple[grpc.Server, str]:
    """Starts the service on the first free port of PORTS (no port sharing)."""
    for port in PORTS:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=[("grpc.so_reuseport", 0)])
        reward_pb2_grpc.add_RewardServiceServicer_to_server(service, server)
        address = f"127.0.0.1:{port}"
        try:
            bound = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
        except RuntimeError:
            bound = 0
        if bound:
            server.start()
            return server, address
    raise RuntimeError(f"no free port in {PORTS}")


@pytest.fixture
def servers():
    """serve() for a test; every server it started is stopped afterwards."""
    started: list[grpc.Server] = []

    def start(service, credentials=None) -> str:
        server, address = serve(service, credentials)
        started.append(server)
        return address

    yield start
    for server in started:
        server.stop(grace=None)


# --- target and options -------------------------------------------------------------


def test_a_list_of_addresses_becomes_one_round_robin_target():
    spec = channel_spec(["127.0.0.1:50001", "localhost:50002"])
    assert spec.target == "ipv4:127.0.0.1:50001,127.0.0.1:50002"
    assert spec.label == "127.0.0.1:50001,localhost:50002"
    assert ("grpc.lb_policy_name", "round_robin") in spec.options
    assert channel_spec("127.0.0.1:50001, localhost:50002").target == spec.target
    assert channel_spec("[::1]:1,[::1]:2").target == "ipv6:[::1]:1,[::1]:2"


def test_a_single_target_or_dns_name_passes_through():
    assert channel_spec("judge.internal:50051").target == "judge.internal:50051"
    assert channel_spec("dns:///judges.internal:50051").target == "dns:///judges.internal:50051"
    assert channel_spec("ipv4:10.0.0.1:1,10.0.0.2:1").target == "ipv4:10.0.0.1:1,10.0.0.2:1"


@pytest.mark.parametrize(
    "targets, message",
    [
        (["127.0.0.1:1", "[::1]:2"], "mix IPv4 and IPv6"),
        (["127.0.0.1:1", "no-port"], "'no-port': expected host:port"),
        (["127.0.0.1:1", "dns:///x:1"], "'dns:///x:1': a list takes plain host:port"),
        ([], "no server address"),
    ],
)
def test_bad_targets_are_rejected_with_the_address_named(targets, message):
    with pytest.raises(ValueError, match=message):
        channel_spec(targets)


def test_token_goes_in_authorization_metadata_as_bearer():
    assert auth_metadata("s3cret") == (("authorization", "Bearer s3cret"),)
    assert auth_metadata(None) == ()
    with pytest.raises(ValueError, match="one line"):
        auth_metadata("a\nb")


def test_tls_options_are_checked_when_given(tmp_path):
    with pytest.raises(ValueError, match="given together"):
        TLSOptions(certificate_chain="client.pem")
    with pytest.raises(ValueError, match="root_certificates: cannot read"):
        TLSOptions(root_certificates=tmp_path / "missing.pem").credentials()


# --- retries -------------------------------------------------------------------------


def test_the_retry_policy_becomes_grpcs_own_in_the_service_config():
    policy = RetryPolicy(attempts=4, initial_backoff_s=1.0, max_backoff_s=4.0, multiplier=2.0)
    spec = channel_spec("127.0.0.1:50001", retry=policy)
    config = json.loads(dict(spec.options)["grpc.service_config"])
    assert config["methodConfig"][0]["retryPolicy"] == {
        "maxAttempts": 4, "initialBackoff": "1.0s", "maxBackoff": "4.0s", "backoffMultiplier": 2.0,
        "retryableStatusCodes": ["RESOURCE_EXHAUSTED", "UNAVAILABLE"],
    }
    single = json.loads(RetryPolicy(attempts=1).service_config())
    assert "retryPolicy" not in single["methodConfig"][0]  # gRPC rejects maxAttempts 1


def test_unavailable_and_resource_exhausted_are_retried(servers):
    service = ScriptedService("a", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED])
    with RewardClient(servers(service), retry=FAST_RETRY) as client:
        results = client.score([ITEM])
    assert [r.reward for r in results] == [0.5]
    assert len(service.metadata) == 3


def test_invalid_argument_is_never_retried(servers):
    service = ScriptedService("a", [grpc.StatusCode.INVALID_ARGUMENT])
    address = servers(service)
    with RewardClient(address, retry=FAST_RETRY) as client, pytest.raises(RewardServerError) as error:
        client.score([ITEM])
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert address in str(error.value)
    assert len(service.metadata) == 1


def test_retries_give_up_with_the_last_status(servers):
    service = ScriptedService("a", [grpc.StatusCode.RESOURCE_EXHAUSTED] * 10)
    with RewardClient(servers(service), retry=FAST_RETRY) as client, pytest.raises(RewardServerError) as error:
        client.score([ITEM])
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert len(service.metadata) == FAST_RETRY.attempts


def test_a_server_that_is_down_fails_after_retries_naming_its_address():
    server, address = serve(ScriptedService("gone"))
    server.stop(grace=None).wait()
    with RewardClient(address, retry=FAST_RETRY) as client, pytest.raises(RewardServerError) as error:
        client.score([ITEM])
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE
    assert str(error.value).startswith(f"reward server {address}: Score failed: UNAVAILABLE")
    assert isinstance(error.value, grpc.RpcError)  # code catching gRPC errors still works
    # A reward run in a process pool (AReaL's AsyncRewardWrapper, veRL's prime) sends it back pickled.
    copy = pickle.loads(pickle.dumps(error.value))
    assert (str(copy), copy.code(), copy.details()) == (str(error.value), error.value.code(), error.value.details())


def test_async_client_retries_and_sends_the_token(servers):
    service = ScriptedService("a", [grpc.StatusCode.UNAVAILABLE])
    address = servers(service)

    async def score():
        async with AsyncRewardClient(address, retry=FAST_RETRY, token="s3cret") as client:
            return await client.score([ITEM])

    assert [r.reward for r in asyncio.run(score())] == [0.5]
    assert [m.get("authorization") for m in service.metadata] == ["Bearer s3cret"] * 2


# --- load balancing ------------------------------------------------------------------


def test_round_robin_spreads_calls_over_every_server(servers):
    first, second = ScriptedService("first"), ScriptedService("second")
    addresses = [servers(first), servers(second)]
    # A gRPC target of several addresses is one round_robin channel (a list is a fleet: test_fleet.py).
    with RewardClient("ipv4:" + ",".join(addresses), retry=FAST_RETRY) as client:
        for _ in range(20):
            client.score([ITEM])
    # round_robin sends each call to the next ready connection; pick_first would use one server.
    assert len(first.metadata) > 0 and len(second.metadata) > 0
    assert len(first.metadata) + len(second.metadata) == 20


# --- TLS and token -------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A throwaway CA, a server certificate for localhost/127.0.0.1/geval.test, and a client certificate."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    folder = tmp_path_factory.mktemp("pki")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
            "-keyout", "ca.key", "-out", "ca.pem")
    for name, extensions in [
        ("server", "subjectAltName=DNS:localhost,DNS:geval.test,IP:127.0.0.1"),
        ("client", "extendedKeyUsage=clientAuth"),
    ]:
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
                "-out", f"{name}.csr")
        (folder / f"{name}.ext").write_text(extensions + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem")
    return folder


def server_credentials(pki, require_client_auth: bool = False) -> grpc.ServerCredentials:
    return grpc.ssl_server_credentials(
        [((pki / "server.key").read_bytes(), (pki / "server.pem").read_bytes())],
        root_certificates=(pki / "ca.pem").read_bytes() if require_client_auth else None,
        require_client_auth=require_client_auth,
    )


def test_tls_with_a_private_ca_and_the_token(servers, pki):
    service = ScriptedService("tls")
    address = servers(service, server_credentials(pki))
    tls = TLSOptions(root_certificates=pki / "ca.pem")
    with RewardClient(address, tls=tls, token="s3cret", retry=FAST_RETRY) as client:
        assert [r.reward for r in client.score([ITEM])] == [0.5]
    assert service.metadata[0]["authorization"] == "Bearer s3cret"


def test_tls_refuses_a_server_the_ca_did_not_sign(servers, pki):
    address = servers(ScriptedService("tls"), server_credentials(pki))
    with RewardClient(address, tls=TLSOptions(root_certificates=pki / "client.pem"), retry=FAST_RETRY) as client:
        with pytest.raises(RewardServerError, match=f"reward server {address}: Score failed"):
            client.score([ITEM])


def test_tls_server_name_override_checks_the_certificate_name(servers, pki):
    address = servers(ScriptedService("tls"), server_credentials(pki))
    tls = TLSOptions(root_certificates=pki / "ca.pem", server_name="geval.test")
    with RewardClient(address, tls=tls, retry=FAST_RETRY) as client:
        assert len(client.score([ITEM])) == 1
    wrong = TLSOptions(root_certificates=pki / "ca.pem", server_name="other.test")
    with RewardClient(address, tls=wrong, retry=FAST_RETRY) as client, pytest.raises(RewardServerError):
        client.score([ITEM])


def test_mutual_tls_needs_the_client_certificate(servers, pki):
    address = servers(ScriptedService("mtls"), server_credentials(pki, require_client_auth=True))
    anonymous = TLSOptions(root_certificates=pki / "ca.pem")
    with RewardClient(address, tls=anonymous, retry=FAST_RETRY) as client, pytest.raises(RewardServerError):
        client.score([ITEM])
    identified = TLSOptions(
        root_certificates=pki / "ca.pem", certificate_chain=pki / "client.pem", private_key=pki / "client.key"
    )
    with RewardClient(address, tls=identified, retry=FAST_RETRY) as client:
        assert len(client.score([ITEM])) == 1
