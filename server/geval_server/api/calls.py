"""Every unary call, as the caller sees it: its request decoded here, so that a corrupt
message answers INVALID_ARGUMENT naming the problem and invalid UTF-8 names the field that
holds it (gRPC's own decoding answers `UNKNOWN: Unexpected DecodeError`, and protobuf's
names no field), an unknown method answers
UNIMPLEMENTED naming it, and each call is logged once, with the status it got and what
the servicer added to its record (`call_record()`), and counted."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time

import grpc
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError

from geval_server import metrics

log = logging.getLogger(__name__)

# Orchestrators probe every few seconds; their calls would drown the log at INFO.
QUIET_PREFIXES = ("/grpc.health.v1.Health/",)

_RECORD: contextvars.ContextVar[dict] = contextvars.ContextVar("call_record")


def call_record() -> dict:
    """This call's log entry, for the servicer to add fields to (items, rubrics, failures);
    a throwaway one when the servicer is called without the interceptor (unit tests)."""
    record = _RECORD.get(None)
    return {} if record is None else record


class CallInterceptor(grpc.aio.ServerInterceptor):
    """The outermost interceptor: sees every call, including those auth refuses."""

    async def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        handler = await continuation(handler_call_details)
        if handler is None:
            return grpc.unary_unary_rpc_method_handler(_logged(method, "unknown", None, _unknown(method)))
        if handler.request_streaming or handler.response_streaming:
            return handler  # health Watch and reflection streams: gRPC's own handling
        return grpc.unary_unary_rpc_method_handler(
            _logged(method, method.rsplit("/", 1)[-1], handler.request_deserializer, handler.unary_unary),
            response_serializer=handler.response_serializer,
        )


def _unknown(method: str):
    async def refuse(request, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"unknown method {method[:200]!r}")

    return refuse


def _logged(method: str, label: str, deserialize, behaviour):
    """`behaviour` behind our own decoding, logged with the status the call ends with;
    counted under `label` (a fixed one for unknown methods, which callers name freely)."""

    async def call(raw: bytes, context):
        started = time.perf_counter()
        record = {}
        _RECORD.set(record)  # each call runs in its own task, so its own context
        try:
            try:
                request = deserialize(raw) if deserialize is not None else raw
            except DecodeError as error:
                field = _field_with_bad_utf8(handler_message(deserialize), raw)
                # Our words, then protobuf's (which change between its releases: 6 and 7 differ).
                problem = f"{field}: is not valid UTF-8" if field else "the wire format is corrupt"
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"undecodable request: {problem}; {error}")
            return await behaviour(request, context)
        except asyncio.CancelledError:
            context.set_code(grpc.StatusCode.CANCELLED)  # only for the record: the caller has gone
            raise
        except Exception as error:
            if context.code() is None:  # not an abort: gRPC answers UNKNOWN
                context.set_code(grpc.StatusCode.UNKNOWN)
                context.set_details(f"{type(error).__name__}: {error}")
            raise
        finally:
            _record(method, label, context, time.perf_counter() - started, record)

    return call


def handler_message(deserialize) -> Descriptor | None:
    """The request message a handler decodes: its deserializer is the class's FromString."""
    owner = getattr(deserialize, "__self__", None)
    return getattr(owner, "DESCRIPTOR", None)


def _field_with_bad_utf8(message: Descriptor | None, raw: bytes, path: str = "") -> str | None:
    """The first string field of `raw` (a message of type `message`) that is not UTF-8, as a
    path (`items[3].completion`), found by walking the wire format; None if none is, or the
    bytes are corrupt in another way."""
    if message is None:
        return None
    counts: dict[int, int] = {}
    at = 0
    try:
        while at < len(raw):
            key, at = _varint(raw, at)
            number, wire_type = key >> 3, key & 7
            if wire_type == 0:
                _, at = _varint(raw, at)
                continue
            if wire_type in (1, 5):
                at += 8 if wire_type == 1 else 4
                continue
            if wire_type != 2:
                return None
            size, at = _varint(raw, at)
            value, at = raw[at:at + size], at + size
            field = message.fields_by_number.get(number)
            if field is None:
                continue
            index = counts[number] = counts.get(number, -1) + 1
            name = f"{path}.{field.name}" if path else field.name
            if field.is_repeated:
                name += f"[{index}]"
            if field.type == field.TYPE_STRING:
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    return name
            elif field.type == field.TYPE_MESSAGE:
                found = _field_with_bad_utf8(field.message_type, value, name)
                if found:
                    return found
    except IndexError:
        return None
    return None


def _varint(raw: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = raw[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return value, at
        shift += 7


def _record(method: str, label: str, context, seconds: float, record: dict) -> None:
    code = context.code() or grpc.StatusCode.OK
    metrics.CALLS.labels(label, code.name).inc()
    metrics.CALL_SECONDS.labels(label).observe(seconds)
    entry = {"event": "call", "method": method[:200], "peer": context.peer(), "code": code.name,
             "seconds": round(seconds, 4), **record}
    if code is not grpc.StatusCode.OK and context.details():
        entry["error"] = context.details()[:500]
    level = logging.DEBUG if method.startswith(QUIET_PREFIXES) and code is grpc.StatusCode.OK else logging.INFO
    log.log(level, json.dumps(entry))
