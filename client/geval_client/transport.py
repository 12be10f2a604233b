"""How a client reaches the server: target, TLS, auth token, one channel's options.

One address (or a gRPC target such as `ipv4:10.0.0.1:50051,10.0.0.2:50051`, spread
call by call with gRPC's round_robin) is one channel. Several servers given as a list
of `host:port` (a comma-separated string works too) or one DNS name
(`dns:///judges.internal:50051`) are a fleet (fleet/replicas.py, fleet/calls.py): one channel
per replica, each call spread over them prompt by prompt. The channel carries the retry
policy (retry.py) as its service config.
"""

from __future__ import annotations

import ipaddress
import os
import pathlib
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from .retry import RetryPolicy

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
TOKEN_ENV = "GEVAL_REWARD_AUTH_TOKEN"
Targets = str | Sequence[str]
_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:")


@dataclass(frozen=True)
class TLSOptions:
    """TLS for the channel; paths to PEM files.

    root_certificates: CA bundle that signed the server's certificate (None: system roots).
    certificate_chain, private_key: the client's own certificate, for mutual TLS.
    server_name: the name to check in the server's certificate when it differs from
    the target's host (e.g. connecting by IP address).
    """

    root_certificates: str | pathlib.Path | None = None
    certificate_chain: str | pathlib.Path | None = None
    private_key: str | pathlib.Path | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.certificate_chain is None) != (self.private_key is None):
            raise ValueError("TLSOptions: certificate_chain and private_key must be given together")

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.root_certificates, "root_certificates"),
            private_key=_read(self.private_key, "private_key"),
            certificate_chain=_read(self.certificate_chain, "certificate_chain"),
        )


def _read(path: str | pathlib.Path | None, name: str) -> bytes | None:
    if path is None:
        return None
    try:
        return pathlib.Path(path).read_bytes()
    except OSError as error:
        raise ValueError(f"TLSOptions.{name}: cannot read {path}: {error.strerror}") from error


@dataclass(frozen=True)
class ChannelSpec:
    """Everything needed to open a sync or asyncio channel to the same place."""

    target: str  # as gRPC reads it
    label: str  # as the user wrote it, for error messages
    credentials: grpc.ChannelCredentials | None
    options: tuple[tuple[str, Any], ...]


def channel_spec(targets: Targets, tls: TLSOptions | None = None, retry: RetryPolicy = RetryPolicy()) -> ChannelSpec:
    addresses = _split(targets)
    options: list[tuple[str, Any]] = [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.lb_policy_name", "round_robin"),
        ("grpc.enable_retries", 1),
        ("grpc.service_config", retry.service_config()),
        # gRPC's reconnect backoff grows to 2 minutes by default: a restarted server
        # would go unnoticed that long. Try connecting again as often as calls retry.
        ("grpc.max_reconnect_backoff_ms", int(retry.max_backoff_s * 1000)),
    ]
    if tls is not None and tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    target = addresses[0] if len(addresses) == 1 else _address_list(addresses)
    return ChannelSpec(
        target=target,
        label=",".join(addresses),
        credentials=tls.credentials() if tls is not None else None,
        options=tuple(options),
    )


def is_fleet(targets: Targets) -> bool:
    """Several host:port entries, or a dns: name, which may resolve to several replicas."""
    if isinstance(targets, str):
        return targets.startswith("dns:") or (not targets.startswith(_SCHEMES) and len(_split(targets)) > 1)
    return len(_split(targets)) > 1


def fleet_entries(targets: Targets) -> list[str]:
    """The host:port entries of a fleet target (a dns: name is one entry, without its scheme)."""
    if isinstance(targets, str) and targets.startswith("dns:"):
        name = targets.removeprefix("dns:").lstrip("/")
        if "/" in name:  # dns://authority/name:port: the authority (a DNS server) is not supported
            raise ValueError(f"address {targets!r}: give dns:///name:port (the system resolver is used)")
        _host_port(name)
        return [name]
    entries = _split(targets)
    for entry in entries:
        _host_port(entry)
    return entries


def replica_spec(address: str, host: str, tls: TLSOptions | None, retry: RetryPolicy) -> ChannelSpec:
    """One replica's channel, at a resolved address: gRPC retries only load shedding on it
    (RESOURCE_EXHAUSTED with the server's pushback); a replica that went away is the fleet's
    to route around. With TLS the certificate is checked against the name that was resolved."""
    spec = channel_spec(address, tls, retry)
    options = [(key, value) for key, value in spec.options if key != "grpc.service_config"]
    options.append(("grpc.service_config", retry.service_config(frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED}))))
    if tls is not None and not tls.server_name:
        options.append(("grpc.ssl_target_name_override", host))
    return ChannelSpec(target=address, label=address, credentials=spec.credentials, options=tuple(options))


def resolve(entry: str) -> list[str]:
    """host:port -> the IPv4 `ip:port` addresses it names (a literal address as it is)."""
    host, port = _host_port(entry)
    try:
        literal = ipaddress.ip_address(host)
        return [f"{host}:{port}" if literal.version == 4 else f"[{host}]:{port}"]
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)
    return list(dict.fromkeys(f"{info[4][0]}:{port}" for info in infos))


def read_token(path: str | pathlib.Path | None) -> str | None:
    """A bearer token from a file, else from $GEVAL_REWARD_AUTH_TOKEN; never from the
    command line, which `ps` shows. Raises ValueError for an empty file."""
    if path is None:
        return os.environ.get(TOKEN_ENV) or None
    token = pathlib.Path(path).read_text(encoding="utf-8").strip()
    if not token:
        raise ValueError(f"{path} is empty")
    return token


def auth_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The token travels as `authorization: Bearer <token>` on every call."""
    if token is None:
        return ()
    if not token.strip() or any(c in token for c in "\r\n"):
        raise ValueError("token must be non-empty and on one line")
    return (("authorization", f"Bearer {token}"),)


def open_channel(spec: ChannelSpec) -> grpc.Channel:
    if spec.credentials is None:
        return grpc.insecure_channel(spec.target, options=spec.options)
    return grpc.secure_channel(spec.target, spec.credentials, options=spec.options)


def open_aio_channel(spec: ChannelSpec) -> grpc.aio.Channel:
    if spec.credentials is None:
        return grpc.aio.insecure_channel(spec.target, options=spec.options)
    return grpc.aio.secure_channel(spec.target, spec.credentials, options=spec.options)


def _split(targets: Targets) -> list[str]:
    if isinstance(targets, str):
        targets = [targets] if targets.startswith(_SCHEMES) else targets.split(",")
    addresses = [t.strip() for t in targets if t.strip()]
    if not addresses:
        raise ValueError("no server address given")
    if len(addresses) > 1:
        with_scheme = [a for a in addresses if a.startswith(_SCHEMES)]
        if with_scheme:
            raise ValueError(
                f"address {with_scheme[0]!r}: a list takes plain host:port entries; "
                "give a scheme-prefixed target (dns:///name:port) on its own"
            )
    return addresses


def _address_list(addresses: list[str]) -> str:
    """host:port entries -> one `ipv4:` or `ipv6:` target listing every address."""
    resolved: list[tuple[int, str]] = []
    for address in addresses:
        host, port = _host_port(address)
        try:
            literal = ipaddress.ip_address(host)
            resolved.append((literal.version, f"{host}:{port}" if literal.version == 4 else f"[{host}]:{port}"))
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)
        except socket.gaierror as error:
            raise ValueError(f"address {address!r}: cannot resolve {host!r} to IPv4: {error}") from error
        resolved.extend((4, f"{info[4][0]}:{port}") for info in infos)
    versions = {version for version, _ in resolved}
    if len(versions) > 1:
        raise ValueError(f"addresses {addresses}: mix IPv4 and IPv6; use one family or one dns:/// name")
    unique = list(dict.fromkeys(entry for _, entry in resolved))
    return f"ipv{versions.pop()}:" + ",".join(unique)


def _host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"address {address!r}: expected host:port")
    return host.strip("[]"), int(port)
