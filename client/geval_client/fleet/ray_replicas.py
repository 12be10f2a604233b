"""Judge replicas as Ray actors, for trainers that already run a Ray cluster (veRL, OpenRLHF).

Ray places each replica (with the resources asked for: a GPU each for a GPU judge) and
restarts one whose server died: the actor watches its `geval-reward serve` process and exits
with it, and Ray starts it again (`max_restarts`), on the same port, so the address the
client holds stays good when the replica comes back on the same node. The client gets the
addresses and spreads each call over them as over any fleet:

    replicas = RayReplicas(4, serve_args=["--model", "Qwen/Qwen2.5-7B-Instruct"], num_gpus=1)
    client = RewardClient(replicas.addresses())   # or any trainer adapter's server=...

The nodes need the server installed (`pip install 'geval-reward[gpu]'`); Ray itself is the
`ray` extra. A replica that Ray moves to another node has a new address: call addresses()
again and make a new client.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

READY = re.compile(rb"geval-reward: ready on (\S+):(\d+)")
SERVE = (sys.executable, "-m", "geval_server.cli", "serve")
START_TIMEOUT_S = 1800.0
BASE_PORT = 50061


class JudgeReplica:
    """The actor: one server process on this node, at a fixed port."""

    def __init__(self, command: Sequence[str], host: str, port: int, env: dict[str, str]) -> None:
        import ray

        self._process = subprocess.Popen([*command, "--host", host, "--port", str(port)],
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         env={**os.environ, **env}, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT_S
        for line in self._process.stdout:
            sys.stdout.buffer.write(line)  # the server's log, in Ray's log of this actor
            if READY.search(line) or time.monotonic() > deadline:
                break
        if self._process.poll() is not None or not READY.search(line):
            self._process.kill()
            raise RuntimeError(f"the judge server did not start: {line!r}")
        self._address = f"{ray.util.get_node_ip_address() if host in ('0.0.0.0', '::') else host}:{port}"
        threading.Thread(target=self._watch, daemon=True).start()

    def address(self) -> str:
        return self._address

    def pid(self) -> int:
        """The server process's id (to kill it in a test of the restart)."""
        return self._process.pid

    def _watch(self) -> None:
        """Relays the server's log; when the server exits, so does the actor, and Ray restarts it."""
        for line in self._process.stdout:
            sys.stdout.buffer.write(line)
        self._process.wait()
        os._exit(1)


def _die_with_parent() -> None:
    """The server gets SIGTERM when its actor ends (killed, or its node's Ray gone): no orphan
    holds the port or the accelerator (Linux's PR_SET_PDEATHSIG)."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


class RayReplicas:
    """`count` replicas as Ray actors. serve_args: `geval-reward serve`'s flags (not --host or
    --port); num_gpus, num_cpus: each replica's resources; host: the address to listen on (every
    interface: the replica is reached at its node's address); command: the serving command, for
    a server other than `geval-reward serve`, which must print its ready line as that one does."""

    def __init__(
        self,
        count: int,
        serve_args: Sequence[str] = (),
        *,
        num_gpus: float = 0,
        num_cpus: float = 1,
        max_restarts: int = -1,
        base_port: int = BASE_PORT,
        host: str = "0.0.0.0",
        env: dict[str, str] | None = None,
        command: Sequence[str] = SERVE,
    ) -> None:
        import ray

        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        actor = ray.remote(num_gpus=num_gpus, num_cpus=num_cpus, max_restarts=max_restarts,
                           max_task_retries=-1)(JudgeReplica)
        self._actors = [actor.remote([*command, *serve_args], host, base_port + i, env or {}) for i in range(count)]

    def addresses(self) -> list[str]:
        """Every replica's host:port, once each is serving."""
        import ray

        return ray.get([actor.address.remote() for actor in self._actors])

    def server_pids(self) -> list[int]:
        import ray

        return ray.get([actor.pid.remote() for actor in self._actors])

    def stop(self) -> None:
        import ray

        for actor in self._actors:
            ray.kill(actor, no_restart=True)
