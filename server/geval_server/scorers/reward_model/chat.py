"""A (prompt, completion) as a reward model was trained to read it: the chat [user: prompt,
assistant: completion] (a chat prompt keeps its own messages) through the model's own chat
template, as token ids (engine/chat_template.py: the template's text ours, the contents
user text, checked at start-up against `apply_chat_template`).
"""

from __future__ import annotations

from geval_server.engine.chat_template import Chat, ChatTemplate, mark
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.reward_model.checkpoint import FLAG, RewardModelError

PROBE = (("user", "What is 2 + 2?"), ("assistant", "2 + 2 is 4."))


class ChatRenderer:
    def __init__(self, tokenization: Tokenization) -> None:
        if not getattr(tokenization.tokenizer, "chat_template", None):
            raise RewardModelError(f"{FLAG}: its tokenizer has no chat template, so the server cannot render a "
                                   "(prompt, completion) as the model was trained")
        self._chat = ChatTemplate(tokenization, "reward model")
        self.template, self.trims = self._chat.source, self._chat.trims
        ours, expected = self.ids(PROBE), self._chat.reference(PROBE)
        if ours != expected:
            raise RewardModelError(f"{FLAG}: the chat template's pieces do not encode as apply_chat_template does "
                                   f"({ours} against {expected}); this tokenizer is not served")

    def ids(self, chat: Chat) -> list[int]:
        """The chat's token ids: template text trusted, contents as plain text."""
        ids, contents = self._chat.split([(role, mark(i)) for i, (role, _) in enumerate(chat)])
        for index, after in contents:
            ids += self._chat.content(chat[index][1]) + self._chat.trusted(after)
        return ids
