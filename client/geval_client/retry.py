"""When and how long to wait before calling the server again.

Only statuses that say "try later" are retried: the server is unreachable or
restarting (UNAVAILABLE) or shedding load (RESOURCE_EXHAUSTED). A bad request
(INVALID_ARGUMENT) or a missed deadline fails at once: repeating it cannot help.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import grpc

RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: the k-th wait is min(initial * multiplier**k, max), jittered
    down by up to `jitter` of itself so that many trainer ranks do not retry in step."""

    attempts: int = 5
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    multiplier: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"RetryPolicy.attempts must be >= 1, got {self.attempts}")
        if self.initial_backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError("RetryPolicy backoffs must be >= 0")
        if self.multiplier < 1:
            raise ValueError(f"RetryPolicy.multiplier must be >= 1, got {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"RetryPolicy.jitter must be in [0, 1], got {self.jitter}")

    def delays(self) -> Iterator[float]:
        """The waits between attempts: attempts - 1 of them."""
        for k in range(self.attempts - 1):
            ceiling = min(self.initial_backoff_s * self.multiplier**k, self.max_backoff_s)
            yield ceiling * (1 - self.jitter * random.random())



def is_retryable(code: grpc.StatusCode | None) -> bool:
    return code in RETRYABLE


class RewardServerError(grpc.RpcError, RuntimeError):
    """A call to the reward server failed for good; the message names the target.
    Still a grpc.RpcError with code() and details(), for code that catches those."""

    def __init__(self, target: str, method: str, code: grpc.StatusCode | None, details: str, attempts: int) -> None:
        code_name = code.name if code is not None else "UNKNOWN"
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        super().__init__(f"reward server {target}: {method} failed{tries}: {code_name}: {details}")
        self.target, self.method, self.attempts = target, method, attempts
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def details(self) -> str:
        return self._details
