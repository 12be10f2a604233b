"""deploy/kubernetes/deployment.yaml's command line through `geval-reward serve`'s real
parser, vLLM's engine flags included (tests/unit/test_kubernetes_manifests.py checks it
without vLLM, so there an engine flag added to the manifest would be refused). Starts no
engine."""

from __future__ import annotations

import pathlib

import yaml
from geval_server import cli

DEPLOYMENT = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "deployment.yaml"


def test_the_deployments_command_line_parses_with_vllms_engine_flags():
    (deployment,) = yaml.safe_load_all(DEPLOYMENT.read_text(encoding="utf-8"))
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "serve"
    argv = container["args"][1:]
    parser, engine_flags = cli._serve_parser()
    args = parser.parse_args(argv)
    engine_args = cli.given_engine_flags(parser, engine_flags, argv)
    assert cli._model(args, engine_args, parser)
    assert args.port == 50051 and args.max_connection_age_s > 0
