"""Token check on every call: `authorization: Bearer <token>` metadata.

Health checks stay open so orchestrators can probe the server. A wrong or
missing token gets UNAUTHENTICATED with a fixed message that reveals nothing
about the service, its rubrics or the token; so does an unknown method (no
method discovery without the token). Two `authorization` headers are refused
as ambiguous rather than decided by one of them.
"""

from __future__ import annotations

import hashlib
import hmac

import grpc

HEALTH_PREFIX = "/grpc.health.v1.Health/"
DENIED = "missing or invalid auth token"
AMBIGUOUS = "more than one authorization header; send exactly one"


def _denying(handler: grpc.RpcMethodHandler | None, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same streaming kind as `handler` (unary for an unknown
    method) that only refuses, reading no request."""

    async def refuse(request_or_iterator, context):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    if handler is None:
        return grpc.unary_unary_rpc_method_handler(refuse)

    kinds = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }
    return kinds[(handler.request_streaming, handler.response_streaming)](refuse)


def _digest(value: bytes) -> bytes:
    """Fixed-length digests, so comparing them takes the same time whatever was sent."""
    return hashlib.sha256(value).digest()


class TokenAuthInterceptor(grpc.aio.ServerInterceptor):
    """Accepts a call bearing any one of `tokens` (like `vllm serve --api-key`, which takes several)."""

    def __init__(self, tokens: tuple[str, ...]) -> None:
        if not tokens or not all(tokens):
            raise ValueError("auth tokens must not be empty")
        self._expected = [_digest(f"Bearer {token}".encode()) for token in tokens]

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler_call_details.method.startswith(HEALTH_PREFIX):
            return handler
        sent = [value for key, value in handler_call_details.invocation_metadata or () if key == "authorization"]
        if len(sent) > 1:
            return _denying(handler, AMBIGUOUS)
        value = sent[0] if sent else b""
        digest = _digest(value.encode() if isinstance(value, str) else value)
        # Every expected token is compared, so the time taken does not tell which matched.
        if sum(hmac.compare_digest(digest, expected) for expected in self._expected):
            return handler  # None for an unknown method: UNIMPLEMENTED, now that the caller may know
        return _denying(handler, DENIED)
