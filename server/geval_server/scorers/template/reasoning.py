"""A template in reasoning: the judge writes freely (Prometheus 2's feedback, a critic's
comparison, a reasoning model's think block) and its reply is cut where it writes the
verdict; the verdict is then ours, and the labels are read right after it exactly as after
the pre-filled verdict. Where the judge never writes it within its budget, it is appended.

The cut is a stop string of the judge's generation: only the judge's own tokens are searched,
so a verdict inside the candidate's text (in the user turn) can never end the judge's reply.
"""

from __future__ import annotations

from dataclasses import dataclass

from geval_server.engine.protocol import JudgeEngine
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.geval.reasoning import unclosed_think
from geval_server.scorers.geval.slot import LabelTokenError, LabelVocabulary, ScoreSlot, find_score_slot
from geval_server.scorers.template.spec import TemplateSpec

# Room the slot read needs beyond the prompt and the judge's text: a think block's closer and the verdict.
_ROOM_SLACK = 8


@dataclass(frozen=True)
class Written:
    rationale: str  # the judge's text before the verdict, stripped
    probabilities: dict[str, float]


class TemplateReasoning:
    """One template's verdict as read after the judge's own text."""

    def __init__(self, tokenization: Tokenization, vocabulary: LabelVocabulary, spec: TemplateSpec,
                 slot: ScoreSlot) -> None:
        """The labels after the judge's text must be read as after the pre-filled verdict (the
        same reads), or the template is refused naming why."""
        self._tok = tokenization
        self.verdict = spec.verdict
        self._after = find_score_slot(tokenization, vocabulary, spec.verdict, spec.labels.labels)
        if self._after.plan != slot.plan:
            raise LabelTokenError(f"template {spec.name!r}: this judge's tokenizer spells the labels differently "
                                  "after the judge's text than after the pre-filled verdict")

    def fingerprint(self) -> str:
        return repr((self._after.ids, self.verdict))

    def budget(self, prompt_tokens: int, max_model_len: int, max_tokens: int) -> int:
        """What the judge may write: its budget within the room the context leaves for the read."""
        return min(max_tokens, max_model_len - prompt_tokens - len(self._after.ids) - _ROOM_SLACK)

    async def write_then_read(self, engine: JudgeEngine, prompt: list[int], max_tokens: int, temperature: float,
                              affinity: str) -> Written:
        written = await engine.generate(prompt, max_tokens, (self.verdict,), temperature, affinity=affinity)
        text = written.text
        wrote = self.verdict in self._tok.decode(written.token_ids)  # the text is cut before the first one
        kept = _tokens_of(self._tok, written.token_ids, text)
        rest = text[len(self._tok.decode(kept)):]  # a token that began the verdict also wrote this much of the text
        if not wrote and text and not text[-1].isspace():
            rest += "\n"
        closer = unclosed_think(self._tok.reasoning_turn_close + text)
        closing = self._tok.template(f"\n{closer}\n") if closer else []  # the judge's own markup: a control token
        ids = prompt + kept + self._tok.user(rest) + closing + self._after.ids
        probabilities = await self._after.plan.read(engine, ids, affinity)
        return Written(text.strip(), probabilities)


def _tokens_of(tokenization: Tokenization, token_ids: list[int], text: str) -> list[int]:
    """The longest prefix of the generated tokens that writes only `text` (vLLM's token ids also
    hold the stop string's and an end-of-turn token)."""
    for k in range(len(token_ids), 0, -1):
        if text.startswith(tokenization.decode(list(token_ids[:k]))):
            return list(token_ids[:k])
    return []
