"""A (prompt, completion) as a reward model was trained to read it: the chat [user: prompt,
assistant: completion] (a chat prompt keeps its own messages) through the model's own chat
template, as token ids.

The template's text is ours (its control tokens count); the messages' contents are user
text, encoded so that a `<|im_end|>` written in a completion stays characters and never
closes the turn (engine/tokenization.py, shared with the judge). The template is rendered
once per chat with a marker in place of each content, and each content is encoded between
the pieces. Templates that trim contents (Llama-3's) get them trimmed. At start-up a probe
chat must encode exactly as `apply_chat_template(tokenize=True)` does, so what the server
reads is what the model was trained on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.reward_model.checkpoint import FLAG, RewardModelError

_MARK = "\x00GEVAL_RM_{}\x00"
_MARKS = re.compile("\x00GEVAL_RM_(\\d+)\x00")
PROBE = (("user", "What is 2 + 2?"), ("assistant", "2 + 2 is 4."))

Chat = Sequence[tuple[str, str]]  # (role, content) messages


class ChatRefused(ValueError):
    """The model's chat template refuses this chat (a role it does not take, turns that do not alternate)."""


class ChatRenderer:
    def __init__(self, tokenization: Tokenization) -> None:
        tokenizer = tokenization.tokenizer
        if not getattr(tokenizer, "chat_template", None):
            raise RewardModelError(f"{FLAG}: its tokenizer has no chat template, so the server cannot render a "
                                   "(prompt, completion) as the model was trained")
        self.template = tokenizer.chat_template
        self._tok = tokenization
        padded = self._text([("user", " x "), ("assistant", " y ")])
        self.trims = " y " not in padded
        expected = list(tokenizer.apply_chat_template([{"role": r, "content": c} for r, c in PROBE],
                                                      tokenize=True, return_dict=False))
        if self.ids(PROBE) != expected:
            raise RewardModelError(f"{FLAG}: the chat template's pieces do not encode as apply_chat_template does "
                                   f"({self.ids(PROBE)} against {expected}); this tokenizer is not served")

    def _text(self, chat: Chat) -> str:
        from jinja2 import TemplateError

        messages = [{"role": role, "content": content} for role, content in chat]
        try:
            return self._tok.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        except TemplateError as error:  # the template's own raise_exception: its words
            raise ChatRefused(f"the reward model's chat template refuses this chat: {error}") from error

    def ids(self, chat: Chat) -> list[int]:
        """The chat's token ids: template text trusted, contents as plain text."""
        pieces = _MARKS.split(self._text([(role, _MARK.format(i)) for i, (role, _) in enumerate(chat)]))
        ids = self._tok.begin(pieces[0]) if pieces[0] else list(self._tok.bos)
        for k in range(1, len(pieces), 2):
            content = chat[int(pieces[k])][1]
            ids += self._tok.user(content.strip() if self.trims else content)
            if pieces[k + 1]:
                ids += self._tok.template(pieces[k + 1])
        return ids
