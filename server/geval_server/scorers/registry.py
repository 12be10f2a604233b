"""Every kind of scorer the server knows, one line each (kind.py says what a kind declares).
Their order is the order flags are listed in and kinds are started in, and the first kind
served that offers a default rubric gives the server's default."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from geval_server.scorers.geval.kind import GEvalKind
from geval_server.scorers.judge_steps.kind import JudgeStepsKind
from geval_server.scorers.kind import ScorerKind
from geval_server.scorers.likelihood.kind import LikelihoodKind
from geval_server.scorers.process_reward.kind import ProcessRewardKind
from geval_server.scorers.reward_model.kind import RewardModelKind
from geval_server.scorers.rules.kind import RulesKind
from geval_server.scorers.semscore.kind import SemScoreKind
from geval_server.scorers.template.kind import TemplateKind

KINDS: tuple[ScorerKind, ...] = (
    GEvalKind(),
    LikelihoodKind(),
    SemScoreKind(),
    RewardModelKind(),
    ProcessRewardKind(),
    JudgeStepsKind(),
    RulesKind(),
    TemplateKind(),
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    for kind in KINDS:
        kind.add_flags(parser)


def kind_settings(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Each served kind's settings by name, from parsed flags; a kind not served is left out."""
    chosen = {kind.name: kind.settings(args, parser) for kind in KINDS}
    return {name: settings for name, settings in chosen.items() if settings is not None}


def default_settings(leave_out: Sequence[str] = ()) -> dict[str, Any]:
    """The kinds' settings with every flag at its default: what a ServeConfig built in code
    serves, less the kinds named in leave_out (as `--no-semscore` leaves SemScore out)."""
    parser = argparse.ArgumentParser()
    add_flags(parser)
    settings = kind_settings(parser.parse_args([]), parser)
    return {name: value for name, value in settings.items() if name not in leave_out}


def inline_kinds() -> dict[str, ScorerKind]:
    """The kinds whose specs callers send inline, by their RubricSelection field."""
    return {kind.inline_field: kind for kind in KINDS if kind.inline_field is not None}
