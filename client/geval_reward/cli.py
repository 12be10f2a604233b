"""`geval-reward`: sends `serve` to the server's command line (geval_server.cli),
`audit` and `redteam` to the audit's (geval_audit.cli), and `fit-reward-model` to
geval_audit.reward_model_fit.

Each side is imported only when its command runs: the server needs its extra (vLLM,
torch), the audit needs its own (scipy, matplotlib), and an install with one of them
runs that side's commands."""

from __future__ import annotations

import argparse
import logging
import sys

SERVER_EXTRA_HINT = "the server needs geval-reward's [gpu] extra ([cpu] on a machine without a GPU)"


def _parser(audit_cli, reward_model_fit) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="geval-reward", description="G-Eval reward server and its audits.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="serve rewards over gRPC (flags: geval-reward serve --help)")
    audit_cli.add_parser(commands)
    audit_cli.add_redteam_parser(commands)
    reward_model_fit.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    # `serve` parses alone: its parser holds vLLM's engine flags, so building it imports vLLM.
    if argv[:1] == ["serve"]:
        # The server's modules import its extra's packages where they use them, some only once
        # serving starts (gRPC reflection, vLLM): a missing one is the extra's, wherever it shows.
        try:
            from geval_server import cli as server_cli

            return server_cli.main(argv)
        except ModuleNotFoundError as error:
            if (error.name or "").startswith("geval_server"):
                raise  # our own module missing: a broken install, not a missing extra
            sys.exit(f"geval-reward serve: {error}; {SERVER_EXTRA_HINT}")
    from geval_audit import cli as audit_cli
    from geval_audit import reward_model_fit

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = _parser(audit_cli, reward_model_fit).parse_args(argv)
    commands = {"redteam": audit_cli.redteam_main, "fit-reward-model": reward_model_fit.main}
    raise SystemExit(commands.get(args.command, audit_cli.main)(args))


if __name__ == "__main__":
    main()
