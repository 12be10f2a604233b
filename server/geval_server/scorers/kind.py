"""A kind of scorer as a plugin: everything the server needs to serve one, declared in the
kind's own folder against this one small interface and registered with one line in
registry.py. The command line, the server, the judge, the wire and the group comparisons
know kinds only through it, as vLLM's model registry knows architectures.

A kind declares:
- its serve flags (`add_flags`, one argument group) and the settings they give (`settings`:
  None where the kind is not served, `parser.error` naming the flag where a value is wrong);
- whether it reads the judge (`needs_judge`: not served under `serve --no-judge`) and what
  share of the judge's engine memory its own engine takes (`engine_share`: the server splits
  the memory once among all of them, engine/defaults.split_memory);
- how it starts (`start`: its engine if any, its served scorers, how it prepares the specs
  callers send inline), each scorer then saying how it reads an item (scorers/base.py: request,
  score), how a group compares on it (`Scorer.comparer`) and its wire form (`Score.wire`,
  `Details.wire`);
- the oneof field of `RubricSelection` its inline specs travel in (`inline_field`) and how one
  is read from the wire (`inline_from_wire`).
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from geval_server.scorers.base import Scorer

if TYPE_CHECKING:
    from geval_server.config import ServeConfig
    from geval_server.engine.protocol import ClassifierEngine, Engine, JudgeEngine
    from geval_server.engine.tokenization import Tokenization


class SpecError(ValueError):
    """An inline spec read from the wire is malformed; `field` is its path below the spec
    (`regex.pattern`), so the caller is told which field and why (INVALID_ARGUMENT)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


@dataclass(frozen=True)
class JudgeContext:
    """The judge the server runs, for the kinds that read it."""

    engine: JudgeEngine
    tokenization: Tokenization
    model: str  # as the user named it
    identity: str  # the model and its number format, as content hashes name it (engine/protocol.py)


@dataclass(frozen=True)
class StartContext:
    config: ServeConfig  # what every kind may read: rubric files, defences, limits, engine flags
    judge: JudgeContext | None  # None: serve --no-judge
    probe: Callable[[Scorer], Awaitable[str | None]]  # scores the probe item; the failure, or None
    make_classifier: Callable[..., ClassifierEngine]  # (path, engine_args): a classifier's engine, not started
    # each engine's arguments beside the judge's, by the flag that sets its share (`engine_share`)
    engine_args: Mapping[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Served:
    """What a kind serves once started."""

    scorers: list[Scorer]
    engines: list[Engine] = field(default_factory=list)  # watched, reported in GetInfo, shut down with the server
    # per type of inline spec it takes (inline_from_wire's): the scorer for a spec, prepared once (scorers/inline.py)
    inline: dict[type, Callable[[Any], Awaitable[Scorer]]] = field(default_factory=dict)
    default: str | None = None  # the scorer it offers as the server's default rubric, if any


class ScorerKind:
    """The interface, with what a kind leaves out defaulted: no flags, always served, no judge
    read, no engine of its own, nothing sent inline."""

    name: str  # as ScorerInfo.kind and errors say it
    needs_judge: bool = False
    inline_field: str | None = None  # RubricSelection's oneof field its inline specs come in

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        """Its serve flags, as one argument group."""

    def settings(self, args: argparse.Namespace, parser: argparse.ArgumentParser) -> Any | None:
        """Its settings from the parsed flags (parser.error naming a bad flag); None: not served."""
        return ()

    def check(self, settings: Any, config: ServeConfig) -> Any:
        """What it serves, read and checked before any engine starts (a bad rubric file fails at
        once, not after the judge's minute of start-up); passed to `start` in place of settings."""
        return settings

    def engine_share(self, settings: Any) -> tuple[str, float] | None:
        """(the flag that sets it, the share of the judge's GPU memory) its own engine takes;
        None: no engine of its own. Its engine's arguments are then StartContext.engine_args[flag]."""
        return None

    async def start(self, settings: Any, context: StartContext) -> Served:
        """Its engine started (SystemExit naming its flag where it cannot be served), its scorers ready."""
        raise NotImplementedError

    def inline_from_wire(self, message: Any, limits: Any) -> Hashable:
        """An inline spec from its RubricSelection field (SpecError naming the bad field); the spec
        has `name`, `uses_reference` and `wire_field` (= inline_field), and is prepared by
        Served.inline[type(spec)]."""
        raise NotImplementedError
