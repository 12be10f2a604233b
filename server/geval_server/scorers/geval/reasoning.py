"""Reasoning mode: the judge writes its evaluation first, then the score slot is read
after it (G-Eval reads the label probabilities "conditioned on the chain-of-thought").

Layout: the prompt of the log-probability mode up to the end of the completion, then an
instruction to evaluate first and fill in the form after, and the judge's turn, opened
with the template's thinking switch on (tokenization.py). The judge writes; its text is
cut where it starts the form or a score (STOPS) or at its budget, and a think block it
left open is closed, so the form line comes after its reasoning; then the form and the
slot, where every label's probability is read as in the log-probability mode.

The second request (the slot read) repeats the first one's prompt and the judge's own
generated tokens, so vLLM's prefix cache serves both from the blocks the first filled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from geval_server.engine.protocol import JudgeEngine
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.geval.prompts import FORM_HEADER, completion_end_text
from geval_server.scorers.geval.rubrics import Rubric
from geval_server.scorers.geval.slot import (
    LabelReadPlan,
    LabelTokenError,
    LabelVocabulary,
    ScoreSlot,
    find_score_slot,
)

# Think blocks as the families write them: an opener left unclosed gets its closer.
THINK_BLOCKS = (("<think>", "</think>"), ("<|channel>", "<channel|>"))
FORM_LINE_MARKUP = " \t\r\n-*#"  # what a judge writes before a form line's criterion


def ask_text(tokenization: Tokenization, rubric: Rubric) -> str:
    """What follows the completion in this mode, up to where the judge starts writing."""
    return (
        f"{completion_end_text(rubric)}First write a short evaluation of the {rubric.target_label} "
        f"following the Evaluation Steps, then fill in the {FORM_HEADER}{tokenization.reasoning_turn_close}"
    )


def form_after_rationale(rubric: Rubric) -> str:
    return f"\n\n{FORM_HEADER}\n- {rubric.criterion}:"


def stops(rubric: Rubric) -> tuple[str, ...]:
    """Where the judge starts writing the form or a score: its rationale ends there."""
    return ("Evaluation Form", f"{rubric.criterion}:", "Score:", "score:", "Rating:", "[RESULT]")


def rationale_tokens(decode: Callable[[list[int]], str], token_ids: Sequence[int], text: str) -> list[int]:
    """The generated tokens that write `text` (vLLM's text, cut before a stop string), less
    the whitespace and markup that began the form line (`\n- ` before `Coherence:`): the
    longest prefix of token_ids whose decoding begins the text so trimmed. vLLM's token ids
    also hold the stop string's tokens and an end-of-turn token, which must not reach the
    slot read."""
    text = text.rstrip(FORM_LINE_MARKUP)
    for k in range(len(token_ids), 0, -1):
        if text.startswith(decode(list(token_ids[:k]))):
            return list(token_ids[:k])
    return []


def unclosed_think(turn: str) -> str | None:
    """The closer of a think block the judge's turn so far leaves open, if any."""
    for opener, closer in THINK_BLOCKS:
        at = turn.rfind(opener)
        if at >= 0 and turn.find(closer, at) < 0:
            return closer
    return None


@dataclass(frozen=True)
class ReasoningLayout:
    """One rubric's prompt pieces in this mode, tokenized once."""

    tokenization: Tokenization
    ask_ids: list[int]  # after the completion, up to where the judge writes
    form_ids: list[int]  # after the rationale, up to the score slot
    stops: tuple[str, ...]

    def slot_ids(self, rationale_ids: list[int]) -> tuple[str, list[int]]:
        """The rationale as text, and what follows it up to the slot: a think block's
        closer where one is left open, then the form."""
        text = self.tokenization.decode(rationale_ids)
        closer = unclosed_think(self.tokenization.reasoning_turn_close + text)
        closing = self.tokenization.template(f"\n{closer}") if closer else []
        return text, closing + self.form_ids

    @property
    def room(self) -> int:
        """Tokens the slot read adds beyond the prompt and the rationale, at most."""
        longest_closer = max(len(self.tokenization.template(f"\n{closer}")) for _, closer in THINK_BLOCKS)
        return longest_closer + len(self.form_ids) + 1

    def fingerprint(self) -> str:
        return repr((self.ask_ids, self.form_ids, self.stops))

    def budget(self, prompt_tokens: int, max_model_len: int, max_tokens: int) -> int:
        """The most the judge may write after a prompt of `prompt_tokens` (ending with
        ask_ids): its budget, within the room the context leaves for the slot read; below 1
        there is no room."""
        return min(max_tokens, max_model_len - prompt_tokens - self.room)


@dataclass(frozen=True)
class Reasoned:
    rationale: str  # the judge's text, stripped
    probabilities: dict[str, float]  # each label's at the slot after it, as LabelReadPlan.read gives them
    generated_tokens: int


async def write_then_read(engine: JudgeEngine, layout: ReasoningLayout, plan: LabelReadPlan, prompt: list[int],
                          max_tokens: int, temperature: float, affinity: str) -> Reasoned:
    """The judge writes after `prompt` (which ends with the layout's ask_ids) at most
    `max_tokens` (a budget within the room, ReasoningLayout.budget), then the labels are
    read at the slot after its text: the one reasoning read, pointwise or in a comparison.
    Both requests carry `affinity` (the item's prompt), so the second finds the first's blocks."""
    written = await engine.generate(prompt, max_tokens, layout.stops, temperature, affinity=affinity)
    kept = rationale_tokens(layout.tokenization.decode, written.token_ids, written.text)
    rationale, to_slot = layout.slot_ids(kept)
    probabilities = await plan.read(engine, prompt + kept + to_slot, affinity)
    return Reasoned(rationale.strip(), probabilities, len(written.token_ids))


def reasoning_layout(
    tokenization: Tokenization, vocabulary: LabelVocabulary, rubric: Rubric, slot: ScoreSlot
) -> ReasoningLayout:
    """The labels are read after the rationale exactly as after the plain form (the same
    reads), or the rubric is refused naming why."""
    after = find_score_slot(tokenization, vocabulary, form_after_rationale(rubric), rubric.scale.labels,
                            max_reads=None)
    if after.plan != slot.plan:
        raise LabelTokenError(
            f"rubric {rubric.name!r}: this judge's tokenizer spells the labels differently after the "
            "judge's evaluation than after the plain form"
        )
    ask = tokenization.template(ask_text(tokenization, rubric))
    return ReasoningLayout(tokenization, ask, after.ids, stops(rubric))
