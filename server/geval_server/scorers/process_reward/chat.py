"""A prompt and its steps as a process reward model was trained to read them: the chat
[user: prompt, assistant: step1 TAG step2 TAG ...] (a chat prompt keeps its own messages)
through the model's own chat template, as token ids, with where each tag stands.

As for the reward model, the template's text is ours and the contents and steps are user
text (engine/chat_template.py), so a step cannot write a tag of its own where the tag is a
control token (Qwen2.5-Math-PRM's `<extra_0>`). The tags are ours: each is put in as its id,
so its position is known whatever the step's text encodes to. At start-up a probe chat must
encode exactly as `apply_chat_template(tokenize=True)` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from geval_server.engine.chat_template import Chat, ChatRefused, ChatTemplate, mark
from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.process_reward.checkpoint import FLAG, ProcessRewardError

PROBE_PROMPT = (("user", "What is 2 + 2?"),)
PROBE_STEPS = ("2 + 2 means adding two and two.", "So the answer is 4.")


@dataclass(frozen=True)
class StepChat:
    ids: tuple[int, ...]
    tags: tuple[int, ...]  # the position of each step's tag in ids


class StepChatRenderer:
    def __init__(self, tokenization: Tokenization, tag: str) -> None:
        if not getattr(tokenization.tokenizer, "chat_template", None):
            raise ProcessRewardError(f"{FLAG}: its tokenizer has no chat template, so the server cannot render a "
                                     "(prompt, steps) chat as the model was trained")
        if not tag:
            raise ProcessRewardError("--step-tag: must not be empty")
        tag_ids = tokenization.template(tag)
        if len(tag_ids) != 1:
            raise ProcessRewardError(f"--step-tag {tag!r}: encodes as {len(tag_ids)} tokens {tag_ids}; a PRM reads "
                                     "each step's score at one token (Qwen2.5-Math-PRM: <extra_0>)")
        self.tag, self.tag_id = tag, tag_ids[0]
        self._chat = ChatTemplate(tokenization, "process reward model")
        self.template, self.trims = self._chat.source, self._chat.trims
        expected = self._chat.reference([*PROBE_PROMPT, ("assistant", "".join(s + tag for s in PROBE_STEPS))])
        try:
            ours = self.render(PROBE_PROMPT, PROBE_STEPS)
        except ChatRefused as error:
            raise ProcessRewardError(f"{FLAG}: the probe chat is refused: {error}") from error
        if list(ours.ids) != expected:
            raise ProcessRewardError(f"{FLAG}: the chat template's pieces do not encode as apply_chat_template does "
                                     f"({list(ours.ids)} against {expected}); this tokenizer is not served")

    def render(self, prompt: Chat, steps: Sequence[str]) -> StepChat:
        """The chat's token ids and its tags' positions: template text trusted, contents and
        steps as plain text, each step followed by the tag's id."""
        contents = [content for _, content in prompt] + list(steps)
        answer = "".join(mark(len(prompt) + k) + self.tag for k in range(len(steps)))
        marked = [(role, mark(i)) for i, (role, _) in enumerate(prompt)] + [("assistant", answer)]
        ids, pieces = self._chat.split(marked)
        tags = []
        for index, after in pieces:
            ids += self._chat.content(contents[index])
            if index >= len(prompt):  # a step: its tag comes first in the template text after it
                if not after.startswith(self.tag):
                    raise ChatRefused(f"the chat template does not write the tag {self.tag!r} after a step")
                tags.append(len(ids))
                ids.append(self.tag_id)
                after = after[len(self.tag):]
            ids += self._chat.trusted(after)
        if len(tags) != len(steps):
            raise ChatRefused(f"the chat template wrote {len(tags)} of the {len(steps)} steps")
        return StepChat(tuple(ids), tuple(tags))
