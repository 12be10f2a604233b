"""Where the score goes, and how each score label's probability is read there.

Tokenizers disagree on how a label follows a colon: one writes ` 4` as a single
token, another (SmolLM2) writes a space token and then `4`. The slot is found by
tokenizing the form followed by each label and keeping the common prefix (never
past the colon and its space): with SmolLM2 that prefix includes the space, which
moved the label mass from 8% to 85% in a probe. Every vocabulary token that spells
a label's first token once stripped (`4`, ` 4`) also starts that label.

A label the tokenizer writes as several tokens (`10` as `1`,`0` for Qwen, Mistral,
Gemma, Llama-2 and Phi-3) is read by chaining, exactly: P(`10`) = P(`1`) · P(`0` | `1`),
read with one more engine request on the slot followed by `1` (the same prompt plus
one token, so vLLM's prefix cache computes only that token). The label `1` then counts
P(`1`) · P(the number ends | `1`), where the number ends unless the next token begins
with a digit (`10`, `15` are other numbers; `1.`, `1\\n`, `1/10` are the label 1). A
label that is not the start of another label's spelling is read from its first token
alone, as G-Eval reads every single-token label. The reads a rubric needs (a
`LabelReadPlan`) and how their answers combine are pure logic, here; issuing them is
the scorer's job.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from geval_server.engine.protocol import JudgeEngine
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.base import Unservable


class LabelTokenError(Unservable):
    """A score label cannot be read exactly from this judge's score slot."""


@dataclass(frozen=True)
class SlotRead:
    """One engine request: the log-probabilities of token_ids at the slot followed by prefix."""

    prefix: tuple[int, ...]
    token_ids: tuple[int, ...]


@dataclass(frozen=True)
class LabelReadPlan:
    """The engine reads a rubric's labels need, and how their answers combine.

    reads[0] is the slot itself (empty prefix); each further read follows a label's
    first token(s). spellings: label -> every token sequence that writes it after the
    slot. continuing: the tokens that continue a number (they begin with a digit).
    """

    reads: tuple[SlotRead, ...]
    spellings: Mapping[str, tuple[tuple[int, ...], ...]]
    continuing: frozenset[int]

    async def read(self, engine: JudgeEngine, ids: list[int], affinity: str) -> dict[str, float]:
        """Each label's probability (not renormalized) when the judge's next tokens follow
        `ids`, which end at the slot: the one way a slot is read, pointwise or in a comparison.
        Each read of the plan is one engine request on `ids` plus that read's prefix, all in
        flight at once; they share `ids`, so vLLM's prefix cache computes it once and each
        further read costs its last block. affinity: the prompt the reads are made for."""
        if len(self.reads) == 1:  # the slot alone: one request, awaited without a task of its own
            answer = await engine.token_logprobs(ids, list(self.reads[0].token_ids), affinity=affinity)
            return self.label_probabilities([answer])
        answers = await asyncio.gather(
            *(engine.token_logprobs(ids + list(read.prefix), list(read.token_ids), affinity=affinity)
              for read in self.reads)
        )
        return self.label_probabilities(answers)

    def label_probabilities(self, answers: Sequence[Mapping[int, float]]) -> dict[str, float]:
        """Exact probability of each label: answers[i] maps token id -> log-probability
        as read by reads[i]. A token the engine did not return counts as probability 0."""
        if len(answers) != len(self.reads):
            raise ValueError(f"expected {len(self.reads)} answers, one per read, got {len(answers)}")
        if len(self.reads) == 1:  # every spelling is one token at the slot: nothing chained
            (answer,) = answers
            return {label: sum(_probability(answer, spelling[0]) for spelling in spellings)
                    for label, spellings in self.spellings.items()}
        at = {read.prefix: answer for read, answer in zip(self.reads, answers)}
        return {label: sum(self._spelling_probability(s, at) for s in spellings)
                for label, spellings in self.spellings.items()}

    def _spelling_probability(self, spelling: tuple[int, ...], at: Mapping[tuple[int, ...], Mapping[int, float]]):
        p = 1.0
        for k, token in enumerate(spelling):
            p *= _probability(at[spelling[:k]], token)
        if spelling in at:  # another label's spelling continues this one: it must end here
            p *= max(0.0, 1.0 - sum(_probability(at[spelling], t) for t in self.continuing))
        return p


def _probability(answer: Mapping[int, float], token: int) -> float:
    return math.exp(answer[token]) if token in answer else 0.0


def plan_label_reads(
    canonical: Mapping[str, tuple[int, ...]],
    alternatives: Mapping[int, Sequence[int]],
    continuing: frozenset[int],
) -> LabelReadPlan:
    """canonical: label -> the tokens the tokenizer writes for it after the slot.
    alternatives: token -> other tokens that read the same once stripped (`1`, ` 1`); a
    label's first token may be any of them. continuing: the tokens that continue a number.
    """
    spellings = {
        label: tuple(sorted({(first, *tokens[1:]) for first in {tokens[0], *alternatives.get(tokens[0], ())}}))
        for label, tokens in canonical.items()
    }
    every = {s for group in spellings.values() for s in group}
    next_tokens: dict[tuple[int, ...], set[int]] = {(): set()}
    for spelling in every:
        for k in range(len(spelling)):
            next_tokens.setdefault(spelling[:k], set()).add(spelling[k])
    for prefix in next_tokens:
        if prefix in every:  # a whole label that another continues: read whether the number ends
            next_tokens[prefix] |= continuing
    reads = tuple(SlotRead(prefix, tuple(sorted(next_tokens[prefix]))) for prefix in sorted(next_tokens, key=len))
    return LabelReadPlan(reads, spellings, continuing)


@dataclass(frozen=True)
class ScoreSlot:
    ids: list[int]  # the form and pre-fill token ids; the next token starts the score
    plan: LabelReadPlan

    @property
    def label_tokens(self) -> dict[str, tuple[int, ...]]:
        """label -> every token that spells it, for a plan of one read (single-token labels)."""
        if len(self.plan.reads) != 1:
            raise LabelTokenError("this slot needs chained reads; use its plan")
        return {label: tuple(s[0] for s in spellings) for label, spellings in self.plan.spellings.items()}

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
    """What the vocabulary holds for reading labels, built once per tokenizer: tokens by
    their stripped text, and the tokens that continue a number."""

    def __init__(self, tokenization: Tokenization) -> None:
        self._ids_by_text: dict[str, list[int]] = {}
        digit_like: list[int] = []
        for token_id in range(len(tokenization.tokenizer)):
            text = tokenization.decode([token_id]).strip()
            if text and len(text) <= 4:  # score labels are short; skip the rest of the vocabulary
                self._ids_by_text.setdefault(text, []).append(token_id)
            if text[:1].isdecimal():
                digit_like.append(token_id)
        # A token decoded alone may lose its leading space (SentencePiece); read it after a letter.
        anchor = tokenization.user("a")
        lead = len(tokenization.decode(anchor))
        self.continuing = frozenset(
            t for t in digit_like if tokenization.decode([*anchor, t])[lead:lead + 1].isdecimal()
        )

    def spellings(self, text: str) -> tuple[int, ...]:
        """Every token whose text, stripped, is `text`."""
        return tuple(self._ids_by_text.get(text, ()))


def find_score_slot(
    tokenization: Tokenization,
    vocabulary: LabelVocabulary,
    lead_text: str,
    labels: Sequence[str],
    max_reads: int | None = None,
) -> ScoreSlot:
    """lead_text ends with the criterion's colon, e.g. `...<|im_start|>assistant\\n- Coherence:`.
    max_reads: the most engine reads per item the caller allows at this slot (None: any);
    a rubric whose labels need more is refused with an error naming a chained label."""
    written = f"{lead_text} "
    spelled = {label: tokenization.template(written + label) for label in labels}
    slot = common_prefix(list(spelled.values()))
    while not written.startswith(tokenization.decode(slot)):  # the slot holds no part of a label
        slot.pop()
    canonical: dict[str, tuple[int, ...]] = {}
    for label, ids in spelled.items():
        rest = tuple(ids[len(slot):])
        if tokenization.decode(list(rest)).strip() != label:
            raise LabelTokenError(
                f"score label {label!r} is written as {[tokenization.decode([t]) for t in rest]} by this judge's "
                "tokenizer after the form, not as the label itself"
            )
        canonical[label] = rest
    alternatives = {
        tokens[0]: vocabulary.spellings(tokenization.decode([tokens[0]]).strip()) for tokens in canonical.values()
    }
    plan = plan_label_reads(canonical, alternatives, vocabulary.continuing)
    if max_reads is not None and len(plan.reads) > max_reads:
        chained = next(label for label, tokens in canonical.items() if len(tokens) > 1)
        pieces = [tokenization.decode([t]) for t in canonical[chained]]
        raise LabelTokenError(
            f"score label {chained!r} is written as {len(pieces)} tokens {pieces} by this judge's tokenizer; "
            f"reading the scale's labels needs {len(plan.reads)} chained engine reads, over the limit of {max_reads}"
        )
    return ScoreSlot(ids=slot, plan=plan)
