"""Every unary call, as the caller sees it: its request decoded here, so that a corrupt
message or invalid UTF-8 answers INVALID_ARGUMENT naming the problem (gRPC's own
decoding answers `UNKNOWN: Unexpected DecodeError`), an unknown method answers
UNIMPLEMENTED naming it, and each call is logged once, with the status it got and what
the servicer added to its record (`call_record()`), and counted."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time

import grpc
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
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"undecodable request: {error}")
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
