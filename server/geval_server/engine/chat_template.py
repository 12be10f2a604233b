"""A trained model's own chat template, rendered so that its text is ours and its messages'
contents stay user text: what the reward model and the process reward model read.

The template is rendered once per chat with a marker in place of each content; the text
between markers is the template's (its control tokens count), each content is encoded as
user text (engine/tokenization.py: a `<|im_end|>` or `<extra_0>` written in a completion
stays characters and never closes a turn or forges a tag). Templates that trim contents
(Llama-3's) get them trimmed. Each scorer checks at start-up that a probe chat encodes
exactly as `apply_chat_template(tokenize=True)` does, so what the server reads is what the
model was trained on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from geval_server.engine.tokenization import Tokenization

_MARK = "\x00GEVAL_CHAT_{}\x00"
_MARKS = re.compile("\x00GEVAL_CHAT_(\\d+)\x00")

Chat = Sequence[tuple[str, str]]  # (role, content) messages


class ChatRefused(ValueError):
    """The model's chat template refuses this chat (a role it does not take, turns that do not alternate)."""


def mark(index: int) -> str:
    """The marker standing for content `index` in a chat given to `ChatTemplate.split`."""
    return _MARK.format(index)


class ChatTemplate:
    def __init__(self, tokenization: Tokenization, model: str) -> None:
        """model: who the template belongs to, as refusals name it ("reward model")."""
        self.source = tokenization.tokenizer.chat_template
        self._tok = tokenization
        self._model = model
        self.trims = " y " not in self.text([("user", " x "), ("assistant", " y ")])

    def text(self, chat: Chat) -> str:
        from jinja2 import TemplateError

        messages = [{"role": role, "content": content} for role, content in chat]
        try:
            return self._tok.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        except TemplateError as error:  # the template's own raise_exception: its words
            raise ChatRefused(f"the {self._model}'s chat template refuses this chat: {error}") from error

    def split(self, marked: Chat) -> tuple[list[int], list[tuple[int, str]]]:
        """A chat whose contents are markers (`mark`), rendered: the ids of the template's
        text before the first content, then each content's index with the template text after it."""
        pieces = _MARKS.split(self.text(marked))
        head = self._tok.begin(pieces[0]) if pieces[0] else list(self._tok.bos)
        return head, [(int(pieces[k]), pieces[k + 1]) for k in range(1, len(pieces), 2)]

    def content(self, text: str) -> list[int]:
        """A message's content as user text, trimmed where the template trims."""
        return self._tok.user(text.strip() if self.trims else text)

    def trusted(self, text: str) -> list[int]:
        """Template text, its control tokens as their ids."""
        return self._tok.template(text) if text else []

    def reference(self, chat: Chat) -> list[int]:
        """The chat as `apply_chat_template(tokenize=True)` encodes it: what the probe must equal."""
        messages = [{"role": role, "content": content} for role, content in chat]
        return list(self._tok.tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False))
