"""What the judge takes: a request checked by the wire (api/wire.py builds these), and the
error for a caller's rubric this judge cannot read. The judge never imports the wire."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from geval_server.groupwise.plan import Group, Schedule
from geval_server.groupwise.win_matrix import Aggregation
from geval_server.scorers.base import ItemFailure, JudgeInput, Scorer
from geval_server.scorers.scoring_mode import ScoringMode

Choice = str | Hashable  # a served scorer's name, or a spec sent with the request (a kind's inline spec)
ChoiceSelection = list[tuple[Choice, float]]
Selection = Sequence[tuple[Scorer, float]]  # an item's scorers and their weights


class UnservableRubric(ValueError):
    """A rubric sent for the whole request that this judge cannot read (a label it cannot
    spell, one of its control tokens in the text): the caller's to fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class ValidRequest:
    items: list[JudgeInput | ItemFailure]
    ids: list[str]
    selection: ChoiceSelection  # the request's rubrics
    item_selections: list[ChoiceSelection | None]  # an item's own rubrics, where it sent any
    mode: ScoringMode
    gate: Choice | None = None  # a rule checked first (judge/gate.py)
    gate_reward: float = 0.0

    @property
    def choices(self) -> list[Choice]:
        own = [choice for selection in self.item_selections if selection for choice, _ in selection]
        return [choice for choice, _ in self.selection] + own


@dataclass(frozen=True)
class ValidGroups:
    groups: list[Group | ItemFailure]
    ids: list[str]
    selection: ChoiceSelection
    schedule: Schedule | None
    neighbours: int
    aggregation: Aggregation
    mode: ScoringMode
    dry_run: bool
    gate: Choice | None = None
    gate_reward: float = 0.0
