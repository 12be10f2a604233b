"""ScoringAborted: a sample that could not be scored, where a trainer would turn an
Exception into 0.0 (veRL's prime and rate_limited managers catch every Exception).

It is a BaseException, so a framework's `except Exception` lets it through and the step
stops with its message. Ray 2.49 and later report a BaseException raised in a task or an
actor as that task's error; Ray 2.48 and older catch only Exception there, so the worker
crashes (a task is run again up to 3 times, then WorkerCrashedError; an actor dies with an
ActorDiedError that blames the OOM killer) and the cause is lost. Inside such a worker the
error is made (`aborted`) as a BaseException that Ray 2.48 does report, with the task
called once and the actor alive:

- a KeyboardInterrupt in a task or a threaded actor;
- an asyncio.CancelledError in an asyncio actor (veRL's reward loop workers), where a
  KeyboardInterrupt would stop the actor's event loop and leave every call on it hanging.

Ray reports either as the call's TaskCancelledError, which it makes with no message: for a task
or a threaded actor it keeps only the frames of the KeyboardInterrupt it is handling; for an
asyncio actor it is handling only the bare concurrent.futures.CancelledError asyncio hands
across threads (the event loop's CancelledError and its message stay behind). So in such a
worker only, TaskCancelledError takes the cause as its error_message (`_cause_named`): the
ScoringAborted being handled, else the message the asyncio actor's call kept under its task id.
That text ends the traceback Ray sends, so the error the driver's ray.get raises names the cause.

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

_ASYNCIO_CAUSES: dict[str, str] = {}
"""Ray 2.48 and older: the message of each asyncio actor call being aborted, by task id (hex),
until Ray makes that call's TaskCancelledError."""


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
    _name_causes_of_cancellations()
    if worker.core_worker.current_actor_is_asyncio():
        _ASYNCIO_CAUSES[worker.core_worker.get_current_task_id().hex()] = message
        return _CancelledCoroutine(message)
    return _CancelledTask(message)


def _name_causes_of_cancellations() -> None:
    """Wraps the __init__ of Ray's TaskCancelledError, once and in this worker process only, so
    that one Ray makes without a message takes _cause_named's; any other is made as before."""
    cancelled = sys.modules["ray.exceptions"].TaskCancelledError
    if getattr(cancelled.__init__, "names_aborted_cause", False):
        return
    init = cancelled.__init__

    def __init__(self, task_id=None, error_message=None):
        init(self, task_id, error_message)
        if error_message is None:
            self.error_message = _cause_named(task_id)

    __init__.names_aborted_cause = True
    cancelled.__init__ = __init__


def _cause_named(task_id) -> str | None:
    """The message of the ScoringAborted Ray is handling as a task's or a threaded actor's
    KeyboardInterrupt (also one prime's pool sent back, made again in another thread), else of
    the asyncio actor call `task_id`, else None."""
    handled = sys.exc_info()[1]
    if isinstance(handled, ScoringAborted):
        return str(handled)
    return _ASYNCIO_CAUSES.pop(task_id.hex(), None) if hasattr(task_id, "hex") else None


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
