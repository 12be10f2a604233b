"""What every way of scoring an item shares.

A scorer is served under a name and chosen like a rubric. The judge turns each
(item, scorer) into a request with `Scorer.request`, scores each distinct request
once with `Scorer.score` (all of a scorer's requests in one call, so it can batch
them), and aggregates the rewards; it never needs to know which scorer is which.
Each scorer returns its own result type holding what it measured, and describes
itself with its own details in ScorerInfo. In a group (ScoreGroups) a scorer is
compared by its `comparer` (groupwise/comparer.py), or refused where it has none.
How a kind of scorer is served (its flags, its engine, its inline specs) is its
plugin's to say (kind.py).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from geval_server.scorers.scoring_mode import ScoringMode

if TYPE_CHECKING:
    from geval_server.groupwise.comparer import Comparer


STEP_REDUCTIONS = ("min", "mean", "last", "product")  # how process rewards make one reward of their steps


@dataclass(frozen=True)
class StepOptions:
    """How a caller asks process rewards to take a completion's steps (ScoreRequest.steps,
    Item.steps); the scorers that read steps split and reduce by it, the others ignore it."""

    delimiter: str | None = None  # None: blank lines
    reduction: str | None = None  # one of STEP_REDUCTIONS; None: the scorer's own
    steps: tuple[str, ...] | None = None  # the item's own steps, instead of splitting


@dataclass(frozen=True)
class JudgeInput:
    """One (prompt, completion[, reference]) pair, the prompt already flattened to text;
    chat keeps a chat prompt's (role, content) messages for a scorer that reads them as a
    chat (the reward model)."""

    prompt: str
    completion: str
    reference: str | None = None
    chat: tuple[tuple[str, str], ...] | None = None
    steps: StepOptions | None = None  # process rewards' step options, where the caller gave any


ROLE_LABELS = {"system": "System", "developer": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def render_chat(messages: list[tuple[str, str]]) -> str:
    """Flattens a chat prompt into the text a scorer reads as JudgeInput.prompt (the judge's
    input section); the messages themselves stay in JudgeInput.chat."""
    return "\n\n".join(f"{ROLE_LABELS[role]}: {content}" for role, content in messages)


class Unservable(ValueError):
    """A caller's rubric or rule that this server cannot serve (a label the judge cannot
    spell, a pattern that does not compile, a kind the server does not run): the caller's
    to fix, answered as INVALID_ARGUMENT. Each kind raises its own subclass."""


class ReadFailure(RuntimeError):
    """A read that gave nothing a reward can be made of (no probability on any label): the
    item fails INTERNAL, as a fact about the judge, not logged as a bug."""


class ItemFailure(Exception):
    """One item (or one of its scorers) could not be scored; the batch goes on.
    code is a gRPC status name; field names the offending field, e.g. items[3].completion."""

    def __init__(self, code: str, message: str, field: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field


class Score(Protocol):
    """One scorer's verdict on one request: its reward in [0, 1] and whatever it measured."""

    @property
    def reward(self) -> float: ...

    def wire(self) -> dict:
        """What it measured as the fields of its RubricScore (`{"geval": {...}}`): each scorer
        writes its own, so the servicer never needs to know which scorer is which."""


class Details(Protocol):
    """A scorer's own description (a G-Eval rubric, a likelihood spec, ...)."""

    def wire(self) -> dict:
        """As the fields of its RubricInfo, its kind's enum value included
        (`{"kind": SCORER_KIND_GEVAL, "geval": GEvalRubric(...)}`)."""


@dataclass(frozen=True)
class ScorerInfo:
    """What GetInfo tells about a scorer, so a reward can be traced to what produced it.
    min_score, max_score and higher_is_better describe the value the scorer measures;
    details are the scorer's own description (a G-Eval rubric, a likelihood spec, ...)."""

    name: str
    kind: str  # the kind's name (kind.py), as errors and logs say it
    min_score: float
    max_score: float
    higher_is_better: bool
    uses_reference: bool
    content_hash: str
    details: Details


class Scorer(Protocol):
    name: str
    kind: str  # the kind's name (kind.py)
    needs_reference: bool
    # The completion reaches this scorer with score claims (`Coherence: 5`) removed.
    reads_score_slot: bool
    # Its reward is 1.0 (passed) or 0.0 (failed), so it can gate other rubrics (a rule).
    can_gate: bool
    # What compares a group's completions on it (ScoreGroups); None: it is not compared in groups.
    comparer: Comparer | None
    content_hash: str

    def request(self, item: JudgeInput, where: str) -> Hashable:
        """What scoring `item` takes; equal requests are scored once. `where` names the
        item in errors (`items[3]`). Raises ItemFailure when the item cannot be scored."""

    async def score(self, requests: Sequence[Hashable], mode: ScoringMode) -> list[Score | BaseException]:
        """One result per request, in order; an exception fails the items that sent it."""

    def info(self) -> ScorerInfo: ...
