"""A judge server started for one run (`--start-server`). The only place geval_audit
loads the server's code: every other path runs with the [audit] extra alone."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence


class ServerStartFailed(RuntimeError):
    """The server started for this run did not come up; the message holds its log's tail."""


@contextlib.contextmanager
def started_server(serve_args: Sequence[str]) -> Iterator[str]:
    """`geval-reward serve *serve_args` in a child process for the with-block; yields its address."""
    from geval_server.launcher import ServerStartError, running_server

    with contextlib.ExitStack() as stack:
        try:
            address = stack.enter_context(running_server(*serve_args))
        except ServerStartError as error:
            raise ServerStartFailed(str(error)) from None
        yield address
