"""When and how long to wait before calling the server again.

Only statuses that say "try later" are retried: the server is unreachable or
restarting (UNAVAILABLE) or shedding load (RESOURCE_EXHAUSTED). A bad request
(INVALID_ARGUMENT) or a missed deadline fails at once: repeating it cannot help.

Two layers, each doing what the other cannot:
- gRPC's own retry policy, set in the channel's service config, retries within one
  call: exponential backoff with jitter, and the server's `grpc-retry-pushback-ms`
  honoured (wait exactly that long; a negative value means "do not retry"). gRPC
  caps it at 5 attempts, about 15 s with the default backoff.
- The client's loop calls again, for up to `wait_for_server_s`, when a whole call
  failed while the server was unreachable or still shedding load: a restart takes
  tens of seconds on a CPU and minutes for a large judge on a GPU, longer than
  5 attempts cover. RESOURCE_EXHAUSTED without a pushback is not load shedding
  (a message over the size limit reads the same) and is not called again.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass

import grpc

RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})
SERVICE = "geval.reward.v1.RewardService"
PUSHBACK_KEY = "grpc-retry-pushback-ms"
GRPC_MAX_ATTEMPTS = 5  # gRPC clamps a service config's retryPolicy.maxAttempts to this


@dataclass(frozen=True)
class RetryPolicy:
    """attempts: gRPC attempts per call (1-5, gRPC's limit); the k-th wait is about
    min(initial_backoff_s * multiplier**k, max_backoff_s), or the server's pushback.
    wait_for_server_s: how long to keep calling again while the server stays
    unreachable or busy after a call's attempts are spent (0: never)."""

    attempts: int = 5
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    multiplier: float = 2.0
    wait_for_server_s: float = 300.0

    def __post_init__(self) -> None:
        if not 1 <= self.attempts <= GRPC_MAX_ATTEMPTS:
            raise ValueError(
                f"RetryPolicy.attempts must be 1-{GRPC_MAX_ATTEMPTS} (gRPC's limit per call), got {self.attempts}; "
                "wait_for_server_s sets how long to keep calling a server that is down"
            )
        if not 0 < self.initial_backoff_s <= self.max_backoff_s:
            raise ValueError("RetryPolicy: need 0 < initial_backoff_s <= max_backoff_s")
        if self.multiplier < 1:
            raise ValueError(f"RetryPolicy.multiplier must be >= 1, got {self.multiplier}")
        if self.wait_for_server_s < 0:
            raise ValueError(f"RetryPolicy.wait_for_server_s must be >= 0, got {self.wait_for_server_s}")

    def service_config(self, codes: frozenset[grpc.StatusCode] = RETRYABLE) -> str:
        """The channel's service config: gRPC's retry policy for every method of the reward service,
        retrying `codes` (a fleet's replica channels leave UNAVAILABLE to the fleet, which sends
        the call to another replica at once instead of waiting for this one)."""
        method: dict = {"name": [{"service": SERVICE}]}
        if self.attempts > 1:  # gRPC rejects a retryPolicy with maxAttempts 1
            method["retryPolicy"] = {
                "maxAttempts": self.attempts,
                "initialBackoff": f"{self.initial_backoff_s}s",
                "maxBackoff": f"{self.max_backoff_s}s",
                "backoffMultiplier": self.multiplier,
                "retryableStatusCodes": sorted(code.name for code in codes),
            }
        return json.dumps({"methodConfig": [method]})

    def patience(self) -> Patience:
        return Patience(self)



class Patience:
    """The client's loop over whole calls: after a call failed with error, next_wait()
    is how long to wait before calling again, or None to give up."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._policy = policy
        self._deadline = time.monotonic() + policy.wait_for_server_s
        self._backoff = policy.max_backoff_s  # gRPC's own backoff has already grown this far
        self._started = time.monotonic()

    def next_wait(self, error: grpc.RpcError) -> float | None:
        code = error.code()
        if code not in RETRYABLE:
            return None
        pushback = _pushback_s(error)
        if code is grpc.StatusCode.RESOURCE_EXHAUSTED and (pushback is None or pushback < 0):
            return None
        wait = pushback if pushback is not None else self._backoff * random.uniform(0.5, 1.0)
        if time.monotonic() + wait > self._deadline:
            return None
        return wait

    def elapsed(self) -> float:
        return time.monotonic() - self._started


def try_elsewhere(error: grpc.RpcError) -> bool:
    """This server cannot take the call now (unreachable, or shedding load with a pushback);
    another replica of a fleet may."""
    if error.code() is grpc.StatusCode.UNAVAILABLE:
        return True
    pushback = _pushback_s(error)
    return error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED and pushback is not None and pushback >= 0


def _pushback_s(error: grpc.RpcError) -> float | None:
    """The server's grpc-retry-pushback-ms trailer in seconds (negative: do not retry)."""
    trailing = getattr(error, "trailing_metadata", None)
    for key, value in (trailing() if callable(trailing) else None) or ():
        if key == PUSHBACK_KEY:
            try:
                return int(value) / 1000
            except ValueError:
                return -1.0
    return None
