"""What `geval-reward serve` takes. The defaults here are the server's defaults, read by
the command line too; this module stays light so that the CLI imports it cheaply."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field
from typing import Any

from geval_client.defaults import DEFAULT_PORT, DEFAULT_TIMEOUT_S

from geval_server.api.wire import Limits
from geval_server.defences.chain import DefenceSettings
from geval_server.engine.read_memo import DEFAULT_SIZE as DEFAULT_READ_MEMO_SIZE
from geval_server.engine.remote.config import RemoteConfig


def _default_kinds() -> dict[str, Any]:
    from geval_server.scorers.registry import default_settings

    return default_settings()


@dataclass
class ServeConfig:
    """Everything `geval-reward serve` takes; the defaults here are the server's defaults."""

    model: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    rubric_paths: list[pathlib.Path] = field(default_factory=list)
    default_rubric: str | None = None  # None: the first served kind's default (scorers/registry.py)
    low_confidence_below: float = 0.5
    engine_args: dict[str, Any] = field(default_factory=dict)
    demo: bool = False
    auth_tokens: tuple[str, ...] = ()  # any of them is accepted; none: no auth
    tls_cert: pathlib.Path | None = None
    tls_key: pathlib.Path | None = None
    metrics_port: int | None = None
    limits: Limits = field(default_factory=Limits)
    max_pending_items: int = 16384
    max_message_bytes: int = 64 * 1024 * 1024
    shutdown_grace_s: float = 30.0
    # A connection older than this is sent GOAWAY (gRPC adds +-10% jitter), so clients of a
    # headless Service reconnect and re-resolve DNS and see replicas added since; 0: never.
    max_connection_age_s: float = 300.0
    # How long calls on such a connection may still take: a client's default deadline.
    max_connection_age_grace_s: float = DEFAULT_TIMEOUT_S
    defences: DefenceSettings = field(default_factory=DefenceSettings)
    read_memo_size: int = DEFAULT_READ_MEMO_SIZE
    judge: bool = True  # False: no judge engine, and no kind that reads it (serve --no-judge)
    # each served kind's settings by its name (scorers/kind.py); built in code, every kind at its flags' defaults
    kinds: dict[str, Any] = field(default_factory=_default_kinds)
    remote: RemoteConfig | None = None  # serve --judge-url: the judge on OpenAI-compatible servers
