"""What every kind with a vLLM engine of its own beside the judge's shares (the reward model,
the process reward model): its memory share checked, its engine started and its scorer probed
before the server is ready. Each failure ends the start naming the kind's flag, its engine shut
down, so a model the server cannot drive is refused at start-up, never at the first call."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from geval_server.engine.protocol import Engine
    from geval_server.scorers.base import Scorer
    from geval_server.scorers.kind import StartContext


def memory_fraction(parser: argparse.ArgumentParser, flag: str, value: float) -> float:
    """The share of the judge's GPU memory given with `flag`, checked (parser.error naming it)."""
    if not 0 < value < 1:
        parser.error(f"{flag}: must be between 0 and 1, got {value}")
    return value


def start_engine(engine: Engine, flag: str, path: str, as_what: str) -> None:
    """Starts the kind's engine; one vLLM refuses (architecture, task, memory) is shut down."""
    try:
        engine.start()
    except Exception as error:
        engine.shutdown()
        raise SystemExit(f"geval-reward: {flag} {path}: vLLM cannot serve it as {as_what}: "
                         f"{type(error).__name__}: {error}") from error


async def probe(context: StartContext, scorer: Scorer, engine: Engine, flag: str, path: str) -> None:
    """Scores the probe item with the kind's scorer; one that cannot shuts its engine down."""
    failure = await context.probe(scorer)
    if failure is not None:
        engine.shutdown()
        raise SystemExit(f"geval-reward: {flag} {path}: scoring a probe item failed {failure}")
