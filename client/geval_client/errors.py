"""The client's errors, in one place."""

from __future__ import annotations

import grpc


class RewardServerError(grpc.RpcError, RuntimeError):
    """A call to the reward server failed for good; the message names the target.
    Still a grpc.RpcError with code() and details(), for code that catches those."""

    def __init__(
        self, target: str, method: str, code: grpc.StatusCode | None, details: str, retried_s: float = 0.0
    ) -> None:
        code_name = code.name if code is not None else "UNKNOWN"
        retried = f" (called again for {retried_s:.1f}s)" if retried_s > 0 else ""
        super().__init__(f"reward server {target}: {method} failed: {code_name}: {details}{retried}")
        self.target, self.method, self.retried_s = target, method, retried_s
        self._code, self._details = code, details

    def __reduce__(self):
        """Rebuilt from its fields: a reward run in a process pool (AReaL's AsyncRewardWrapper,
        veRL's prime) sends its error back pickled, and an error that cannot be rebuilt there
        breaks the pool instead of reaching the trainer."""
        return type(self), (self.target, self.method, self._code, self._details, self.retried_s)

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def details(self) -> str:
        return self._details


class ItemNotScored(RuntimeError):
    """An item failed for a reason the completion did not cause, where no reward can stand in
    (trainers that need a number for every sample)."""
