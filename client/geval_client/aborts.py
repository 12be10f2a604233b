"""ScoringAborted: a sample that could not be scored, where a trainer would turn an
Exception into 0.0 (veRL's prime and rate_limited managers catch every Exception).

It is a BaseException, so a framework's `except Exception` lets it through and the step
stops with its message. Ray 2.49 and later report a BaseException raised in a task or an
actor as that task's error; Ray 2.48 and older catch only Exception there, so the worker
crashes (a task is run again up to 3 times, then WorkerCrashedError; an actor dies with an
ActorDiedError that blames the OOM killer) and the cause is lost. Inside such a worker the
error is made (`aborted`) as a BaseException that Ray 2.48 does report, with the task
called once:

- a KeyboardInterrupt in a task or a threaded actor: Ray reports it as the task's
  RayTaskError(TaskCancelledError), the message and traceback in it, the actor alive;
- an asyncio.CancelledError in an asyncio actor (veRL's reward loop workers), where a
  KeyboardInterrupt would stop the actor's event loop and leave every call on it hanging:
  Ray reports TaskCancelledError, the actor alive, but asyncio drops the message, so the
  cause is in the ERROR line logged before it is raised (Ray forwards it to the driver).

The choice is made again wherever the error is unpickled (veRL's prime sends it back from a
process pool to the Ray worker that runs the manager), since the process that raises it on
into Ray is the one that counts.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import re
import sys

FIRST_RAY_REPORTING_BASE_EXCEPTIONS = (2, 49)


class ScoringAborted(BaseException):
    """A sample could not be scored, raised where a trainer would turn an Exception into 0.0.
    Make it with aborted(message), which picks the form the running Ray reports."""

    def __reduce__(self):
        return aborted, (str(self),)


class _CancelledTask(ScoringAborted, KeyboardInterrupt):
    """ScoringAborted as Ray 2.48 and older report it from a task or a threaded actor."""


class _CancelledCoroutine(ScoringAborted, asyncio.CancelledError):
    """ScoringAborted as Ray 2.48 and older report it from an asyncio actor."""


def aborted(message: str) -> ScoringAborted:
    """ScoringAborted(message), in the form the Ray worker this runs in reports (see above)."""
    worker = _old_ray_worker()
    if worker is None:
        return ScoringAborted(message)
    if worker.core_worker.current_actor_is_asyncio():
        return _CancelledCoroutine(message)
    return _CancelledTask(message)


def _old_ray_worker():
    """Ray's worker object when this process is a Ray worker (not the driver) of a Ray that
    crashes on a BaseException (2.48 and older), else None. Ray is never imported here: a
    worker has imported it already. A process pool's worker (veRL's prime) is no Ray worker,
    though it inherits Ray's state: what it raises is sent back and made again (__reduce__)."""
    ray = sys.modules.get("ray")
    if multiprocessing.parent_process() is not None:
        return None
    version = tuple(int(part) for part in re.findall(r"\d+", getattr(ray, "__version__", ""))[:2])
    if ray is None or not version or version >= FIRST_RAY_REPORTING_BASE_EXCEPTIONS:
        return None
    worker = getattr(getattr(getattr(ray, "_private", None), "worker", None), "global_worker", None)
    if worker is None or getattr(worker, "mode", None) != getattr(ray, "WORKER_MODE", object()):
        return None
    return worker
