"""Where the score goes, and which tokens spell each score label.

Tokenizers disagree on how a label follows a colon: one writes ` 4` as a single
token, another (SmolLM2) writes a space token and then `4`. The slot is found by
tokenizing the form followed by each label and keeping the common prefix: with
SmolLM2 that prefix includes the space, which moved the label mass from 8% to
85% in a probe. Every vocabulary token that spells a label once stripped (`4`,
` 4`) counts towards that label.

A label the tokenizer splits into several tokens (`10` as `1`,`0`) would need
chained probabilities; such rubrics are rejected at load with a clear error
instead of being scored wrongly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .prompts import Tokenization


class LabelTokenError(ValueError):
    """A score label is not a single token for this judge."""


@dataclass(frozen=True)
class ScoreSlot:
    ids: list[int]  # the form and pre-fill token ids; the next token is the score
    label_tokens: dict[str, tuple[int, ...]]  # label -> every token id that spells it

    @property
    def all_label_token_ids(self) -> list[int]:
        return sorted({t for tokens in self.label_tokens.values() for t in tokens})


def common_prefix(sequences: Sequence[Sequence[int]]) -> list[int]:
    prefix: list[int] = []
    for column in zip(*sequences):
        if any(token != column[0] for token in column):
            break
        prefix.append(column[0])
    return prefix


class LabelVocabulary:
    """Maps stripped token text to token ids, built once per tokenizer."""

    def __init__(self, tokenization: Tokenization) -> None:
        tokenizer = tokenization.tokenizer
        self._ids_by_text: dict[str, list[int]] = {}
        for token_id in range(len(tokenizer)):
            text = tokenizer.decode([token_id]).strip()
            if text and len(text) <= 4:  # score labels are short; skip the rest of the vocabulary
                self._ids_by_text.setdefault(text, []).append(token_id)

    def spellings(self, label: str) -> tuple[int, ...]:
        return tuple(self._ids_by_text.get(label, ()))


def find_score_slot(
    tokenization: Tokenization, vocabulary: LabelVocabulary, lead_text: str, labels: Sequence[str]
) -> ScoreSlot:
    """lead_text ends with the criterion's colon, e.g. `...<|im_start|>assistant\\n- Coherence:`."""
    spelled = {label: tokenization.template(f"{lead_text} {label}") for label in labels}
    slot = common_prefix(list(spelled.values()))
    label_tokens: dict[str, tuple[int, ...]] = {}
    for label, ids in spelled.items():
        rest = ids[len(slot):]
        if len(rest) != 1 or tokenization.decode(rest).strip() != label:
            pieces = [tokenization.decode([t]) for t in rest]
            raise LabelTokenError(
                f"score label {label!r} is written as {len(rest)} tokens {pieces} by this judge's "
                "tokenizer, so its probability cannot be read from one score slot; use a scale "
                "whose labels are single tokens (for example 1-5 or 0-9)"
            )
        label_tokens[label] = tuple(sorted(set(vocabulary.spellings(label)) | {rest[0]}))
    return ScoreSlot(ids=slot, label_tokens=label_tokens)
