"""Starts `geval-reward serve` in a child process and waits until it is ready.

Used by scripts and tests that need a real server but not in-process: vLLM
starts worker processes of its own, and a separate server process keeps the
caller light.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

READY = re.compile(r"geval-reward: ready on (\S+):(\d+)")


class ServerStartError(RuntimeError):
    """The server exited or did not report ready; the message holds its log's tail."""


def start_server(
    log_path: pathlib.Path, *serve_args: str, timeout_s: float = 900.0, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, str]:
    """Runs `geval-reward serve --port 0 *serve_args`, with `env` added to this process's
    environment; returns the process and its address."""
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "geval_server.cli", "serve", "--port", "0", *serve_args],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
            start_new_session=True,  # its own process group: see stop_server
        )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        match = READY.search(log_path.read_text(errors="replace"))
        if match:
            return process, f"{match.group(1)}:{match.group(2)}"
        if process.poll() is not None:
            stop_server(process)  # reaps what it started before dying
            raise ServerStartError(
                f"server exited with {process.returncode}; log {log_path}:\n{log_path.read_text()[-4000:]}"
            )
        time.sleep(0.5)
    stop_server(process)
    raise ServerStartError(f"server not ready after {timeout_s:.0f}s; log {log_path}")


def stop_server(process: subprocess.Popen, grace_s: float = 60.0) -> None:
    """SIGTERM (the server drains and shuts its engine down), then SIGKILL to the
    whole process group: vLLM's engine process does not watch its parent, and
    would otherwise outlive a server that died hard, holding its memory."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


@contextlib.contextmanager
def running_server(*serve_args: str) -> Iterator[str]:
    """A server for the duration of a with-block; yields its address."""
    log_path = pathlib.Path(tempfile.mkstemp(prefix="geval-reward-", suffix=".log")[1])
    process, address = start_server(log_path, *serve_args)
    try:
        yield address
    finally:
        stop_server(process)
