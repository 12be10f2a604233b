"""A template rendered through the judge's chat template as token ids: the template is the
user turn, its placeholders the item's text, and the assistant turn is pre-filled with the
verdict, so the next token is the label (scorers/geval/slot.py finds that slot and plans the
label reads, as for a G-Eval form).

The template's own text is ours (a control token in it is refused, as in a rubric); the
item's text is the caller's: it never encodes as a control token (engine/tokenization.py)
and a boundary tag in it is escaped (defences/boundaries.py). The verdict is written by us
in the judge's turn, after the user turn closes: a verdict a completion writes (`[RESULT] 5`,
`[[A]]`, `</answer>`) stays inside the user turn, and the label is never read there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from geval_server.defences.boundaries import escape_boundaries
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.geval.rubrics import RubricError
from geval_server.scorers.geval.slot import LabelVocabulary, ScoreSlot, find_score_slot
from geval_server.scorers.template.spec import PLACEHOLDER, TemplateSpec


@dataclass(frozen=True)
class TemplateRequest:
    """One item's prompt for a template: compared and hashed by the text it places (equal
    text, equal ids); the ids in pieces, and each field's token count for a too-long error."""

    texts: tuple[tuple[str, str], ...]  # (placeholder, escaped text), in the template's order
    pieces: tuple[Sequence[int], ...] = field(compare=False)
    tokens: tuple[tuple[str, int], ...] = field(compare=False)  # (placeholder, its tokens)

    def __len__(self) -> int:
        return sum(map(len, self.pieces))

    @property
    def ids(self) -> list[int]:
        ids: list[int] = []
        for piece in self.pieces:
            ids += piece
        return ids

    @property
    def affinity(self) -> str:
        """The item's prompt where the template reads it (a GRPO group's reads share it)."""
        return dict(self.texts).get("prompt", "")


def check_template_text(tokenization: Tokenization, spec: TemplateSpec) -> None:
    """The template and verdict are written as our own text, and come from callers: one
    holding this judge's control token could close a turn or pre-fill an answer."""
    for key in ("template", "verdict", "criterion"):
        text = getattr(spec, key)
        found = next((token for token in tokenization.control_tokens if token in text), None)
        if found is not None:
            raise RubricError(f"template {spec.name!r}: field '{key}' contains the judge's control token {found!r}",
                              key)


class TemplatePrompt:
    """One template's fixed text tokenized once: the literal pieces between placeholders,
    then the end of the user turn and the verdict up to the slot."""

    def __init__(self, tokenization: Tokenization, vocabulary: LabelVocabulary, spec: TemplateSpec,
                 max_reads: int) -> None:
        check_template_text(tokenization, spec)
        self._tok = tokenization
        literals = PLACEHOLDER.split(spec.template)  # literal, name, literal, name, ..., literal
        self.placeholders = tuple(literals[1::2])
        texts = [escape_boundaries(text) for text in literals[0::2]]
        self._head = tokenization.begin(tokenization.turn_open + texts[0])
        self._between = tuple(tokenization.template(text) for text in texts[1:-1])
        self.slot: ScoreSlot = find_score_slot(tokenization, vocabulary,
                                               texts[-1] + tokenization.turn_close + spec.verdict,
                                               spec.labels.labels, max_reads=max_reads)
        # What the judge writes after, in reasoning mode: the user turn closed, nothing pre-filled.
        self.ask_ids = tokenization.template(texts[-1] + tokenization.reasoning_turn_close)

    def fingerprint(self) -> str:
        """sha256 of every fixed token (chat template, template text, verdict): a layout change
        shows up in the content hash."""
        fixed = [self._head, list(self._between), self.slot.ids, self.ask_ids]
        return hashlib.sha256(json.dumps(fixed).encode()).hexdigest()

    def build(self, values: dict[str, str]) -> TemplateRequest:
        """The prompt up to the slot for the item's text by placeholder."""
        pieces: list[Sequence[int]] = [self._head]
        texts, tokens = [], []
        for k, name in enumerate(self.placeholders):
            text = escape_boundaries(values[name])
            ids = self._tok.user_ids(text)
            texts.append((name, text))
            tokens.append((name, len(ids)))
            pieces.append(ids)
            if k < len(self._between):
                pieces.append(self._between[k])
        pieces.append(self.slot.ids)
        return TemplateRequest(tuple(texts), tuple(pieces), tuple(tokens))

    def without_slot(self, request: TemplateRequest) -> list[int]:
        """The prompt where the judge starts writing (reasoning): the user turn closed, its reply open."""
        ids = request.ids
        return ids[:len(ids) - len(self.slot.ids)] + self.ask_ids
