"""deploy/kubernetes/: every manifest validates offline and strictly against Kubernetes'
own schemas (kubernetes-validate ships them), and holds together where a schema cannot
see: probes on the port the server serves health on, selectors that pick the judge pods,
a headless Service, a grace period above the server's, and a command line that
`geval-reward serve` accepts. Then the server's connection age, which makes clients of
that headless Service see new replicas: from the flag to gRPC's options to a real
connection being replaced. Nothing here imports vLLM or starts an engine."""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import shlex
import sys
import types

import grpc
import kubernetes_validate
import pytest
import yaml
from geval_client.pb import reward_pb2
from geval_server import cli
from geval_server.config import ServeConfig
from geval_server.engine.vllm_engine import ENGINE_SHUTDOWN_TIMEOUT_S
from geval_server.server import server_options
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
# gRPC probes are GA from 1.27 (the oldest schema checked); the newest is kubernetes-validate's own.
KUBERNETES_VERSIONS = ["1.27.0", kubernetes_validate.latest_version()]
SERVICE_NAME = reward_pb2.DESCRIPTOR.services_by_name["RewardService"].full_name


def _id(path: pathlib.Path) -> str:
    return path.name


def documents(path: pathlib.Path) -> list[dict]:
    return [document for document in yaml.safe_load_all(path.read_text(encoding="utf-8")) if document]


def resources() -> dict[str, dict]:
    """Every manifest's resources by kind; each kind once."""
    found: dict[str, dict] = {}
    for path in MANIFESTS:
        for document in documents(path):
            assert document["kind"] not in found, f"{path.name}: a second {document['kind']}"
            found[document["kind"]] = document
    return found


@pytest.fixture(scope="module")
def kinds() -> dict[str, dict]:
    return resources()


@pytest.fixture(scope="module")
def container(kinds) -> dict:
    (judge,) = kinds["Deployment"]["spec"]["template"]["spec"]["containers"]
    return judge


class _ExactParser(argparse.ArgumentParser):
    """argparse's parser taking flags only as spelled in full (no abbreviations)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, allow_abbrev=False, **kwargs)


@pytest.fixture
def serve_parser(monkeypatch) -> argparse.ArgumentParser:
    """`geval-reward serve`'s own parser with vLLM's engine flags left out: vLLM's parser class
    is replaced by argparse's, stricter (no underscore spellings, no abbreviations), so vLLM
    is not imported."""
    stub = types.ModuleType("vllm.utils.argparse_utils")
    stub.FlexibleArgumentParser = _ExactParser
    monkeypatch.setitem(sys.modules, "vllm.utils.argparse_utils", stub)
    monkeypatch.setattr(cli, "add_engine_flags", lambda parser: [])
    monkeypatch.setattr(cli, "given_engine_flags", lambda parser, flags, argv: {})
    parser, engine_flags = cli._serve_parser()
    assert engine_flags == []
    return parser


def serve_args(container: dict, parser: argparse.ArgumentParser) -> argparse.Namespace:
    assert container["command"] == ["geval-reward"] and container["args"][0] == "serve"
    return parser.parse_args(container["args"][1:])


def port_named(container: dict, name: str) -> int:
    (port,) = [port["containerPort"] for port in container["ports"] if port["name"] == name]
    return port


# The schemas.


def test_the_manifests_are_a_deployment_a_headless_service_and_a_disruption_budget(kinds):
    assert MANIFESTS, "no manifests under deploy/kubernetes/"
    assert sorted(kinds) == ["Deployment", "PodDisruptionBudget", "Service"]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=_id)
def test_every_manifest_validates_strictly(path, version):
    for document in documents(path):
        assert {"apiVersion", "kind", "metadata", "spec"} <= document.keys()  # no bare pod spec
        kubernetes_validate.validate(document, version, strict=True)


def test_strict_validation_catches_a_misspelt_field():
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
               "spec": {"clusterIp": "None", "ports": [{"port": 1}]}}
    kubernetes_validate.validate(service, KUBERNETES_VERSIONS[-1], strict=False)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(service, KUBERNETES_VERSIONS[-1], strict=True)


# What a schema cannot see.


def test_the_deployment_selects_its_own_pods(kinds):
    deployment = kinds["Deployment"]["spec"]
    pod_labels = deployment["template"]["metadata"]["labels"]
    assert deployment["selector"]["matchLabels"].items() <= pod_labels.items()


def test_the_service_is_headless_and_selects_the_judge_pods(kinds, container):
    service = kinds["Service"]["spec"]
    pod_labels = kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert service["clusterIP"] == "None"  # DNS answers with every pod, so the client spreads its calls
    assert not service.get("publishNotReadyAddresses", False)  # a judge starting or draining is not in DNS
    assert service["selector"].items() <= pod_labels.items()
    ports = {port["name"]: port for port in service["ports"]}
    assert ports["grpc"]["targetPort"] == "grpc"
    assert ports["grpc"]["port"] == port_named(container, "grpc")
    names = {port["name"] for port in container["ports"]}
    assert all(port["targetPort"] in names for port in service["ports"])


def test_the_disruption_budget_covers_the_judge_pods(kinds):
    budget = kinds["PodDisruptionBudget"]["spec"]
    pod_labels = kinds["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert budget["selector"]["matchLabels"].items() <= pod_labels.items()
    assert budget["selector"]["matchLabels"] == kinds["Deployment"]["spec"]["selector"]["matchLabels"]
    assert budget.get("maxUnavailable") == 1 or budget.get("minAvailable") is not None


def test_the_container_line_is_one_serve_accepts(container, serve_parser):
    args = serve_args(container, serve_parser)
    assert args.host == "0.0.0.0"  # reachable from other pods and by the kubelet's probes
    assert args.port == port_named(container, "grpc")
    assert args.metrics_port == port_named(container, "metrics")
    assert args.max_connection_age_s > 0
    assert args.api_key is None  # a token on the command line is visible in `ps`


def test_a_flag_serve_does_not_take_is_caught(serve_parser):
    for line in ("--max-conection-age-s 300", "--metrics 9464", "--no-such-flag"):
        with pytest.raises(SystemExit):
            serve_parser.parse_args(shlex.split(line))


def test_the_probes_ask_the_servers_grpc_health_service(container, serve_parser):
    port = serve_args(container, serve_parser).port
    probes = {name: container[name] for name in ("startupProbe", "readinessProbe", "livenessProbe")}
    for name, probe in probes.items():
        assert set(probe) & {"grpc", "httpGet", "tcpSocket", "exec"} == {"grpc"}, name
        assert probe["grpc"]["port"] == port, name
    # Readiness asks for the reward service itself; the others for the server ("" or left out).
    assert probes["readinessProbe"]["grpc"]["service"] == SERVICE_NAME
    assert probes["livenessProbe"]["grpc"].get("service", "") == ""
    # The port opens only once the engine is up: the start is the startup probe's, at least minutes long.
    startup = probes["startupProbe"]
    assert startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3) >= 300


def test_the_pod_outlives_the_servers_shutdown_grace(kinds, container, serve_parser):
    # in-flight calls get the server's grace, then the engine its shutdown
    grace = serve_args(container, serve_parser).shutdown_grace_s + ENGINE_SHUTDOWN_TIMEOUT_S
    assert kinds["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > grace


def test_shared_memory_is_a_memory_backed_volume(kinds, container):
    volumes = {volume["name"]: volume for volume in kinds["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    (shm,) = [mount for mount in container["volumeMounts"] if mount["mountPath"] == "/dev/shm"]
    assert volumes[shm["name"]]["emptyDir"]["medium"] == "Memory"


def test_the_token_file_comes_from_a_secret(kinds, container, serve_parser):
    token_file = serve_args(container, serve_parser).auth_token_file
    volumes = {volume["name"]: volume for volume in kinds["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    (mount,) = [mount for mount in container["volumeMounts"]
                if token_file.parent == pathlib.PurePosixPath(mount["mountPath"])]
    assert mount.get("readOnly") is True
    secret = volumes[mount["name"]]["secret"]
    assert secret["secretName"]
    if "items" in secret:  # else every key of the Secret is a file named after it
        assert token_file.name in [item["path"] for item in secret["items"]]


# The server's connection age.


def test_the_connection_age_and_its_grace_are_grpc_options():
    options = dict(server_options(ServeConfig(model="m")))
    assert options["grpc.max_connection_age_ms"] == 300_000
    assert options["grpc.max_connection_age_grace_ms"] == round(ServeConfig.max_connection_age_grace_s * 1000)
    assert options["grpc.max_send_message_length"] == ServeConfig.max_message_bytes
    options = dict(server_options(ServeConfig(model="m", max_connection_age_s=0.25, max_connection_age_grace_s=1.5)))
    assert (options["grpc.max_connection_age_ms"], options["grpc.max_connection_age_grace_ms"]) == (250, 1500)
    options = dict(server_options(ServeConfig(model="m", max_connection_age_s=0)))
    assert "grpc.max_connection_age_ms" not in options and "grpc.max_connection_age_grace_ms" not in options
    options = dict(server_options(ServeConfig(model="m", max_connection_age_s=1e12)))
    assert options["grpc.max_connection_age_ms"] == 2**31 - 1  # a C int


@pytest.mark.parametrize(("line", "age", "grace"), [
    ("", ServeConfig.max_connection_age_s, ServeConfig.max_connection_age_grace_s),
    ("--max-connection-age-s 60 --max-connection-age-grace-s 5", 60.0, 5.0),
    ("--max-connection-age-s 0", 0.0, ServeConfig.max_connection_age_grace_s),
])
def test_the_flags_reach_the_servers_config(serve_parser, monkeypatch, line, age, grace):
    served: list[ServeConfig] = []

    async def serve(config: ServeConfig) -> int:
        served.append(config)
        return 0

    monkeypatch.setattr("geval_server.server.serve", serve)
    for name in ("VLLM_API_KEY", "GEVAL_REWARD_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert cli._serve(shlex.split(line)) == 0
    assert (served[0].max_connection_age_s, served[0].max_connection_age_grace_s) == (age, grace)


def test_a_negative_connection_age_is_an_error_naming_the_flag(serve_parser, capsys):
    with pytest.raises(SystemExit):
        cli._serve(["--max-connection-age-s", "-1"])
    assert "--max-connection-age-s" in capsys.readouterr().err


class _PeerRecordingHealth(health.aio.HealthServicer):
    def __init__(self) -> None:
        super().__init__()
        self.peers: set[str] = set()

    async def Check(self, request, context):  # noqa: N802 (gRPC's name)
        self.peers.add(context.peer())
        return await super().Check(request, context)


async def _connections_seen(config: ServeConfig, seconds: float) -> int:
    """How many connections one client channel made to a server with `config`'s options,
    calling health every 50 ms for `seconds`: a new connection comes from a new client port."""
    server = grpc.aio.server(options=server_options(config))
    servicer = _PeerRecordingHealth()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for _ in range(round(seconds / 0.05)):
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=5, wait_for_ready=True)
                await asyncio.sleep(0.05)
    finally:
        await server.stop(grace=None)
    return len(servicer.peers)


def test_a_connection_older_than_the_age_is_replaced_and_none_without_it():
    aged = ServeConfig(model="m", max_connection_age_s=0.4, max_connection_age_grace_s=0.2)
    assert asyncio.run(_connections_seen(aged, 2.0)) >= 2  # about 5; fewer on a loaded machine
    assert asyncio.run(_connections_seen(ServeConfig(model="m", max_connection_age_s=0), 2.0)) == 1
