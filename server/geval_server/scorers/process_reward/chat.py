"""A prompt and its steps as a process reward model was trained to read them: the chat
[user: prompt, assistant: step1 TAG step2 TAG ...] (a chat prompt keeps its own messages)
through the model's own chat template, as token ids, with where each tag stands.

As for the reward model (scorers/reward_model/chat.py), the template's text is ours and the
messages' contents are user text, encoded so that a control token written in a completion
stays characters: a step cannot write a tag of its own where the tag is a control token
(Qwen2.5-Math-PRM's `<extra_0>`). The tags are ours: each is put in as its id, so its position
is known whatever the step's text encodes to. The template is rendered once per chat with a
marker in place of each content and each step, and the pieces encoded between them. At
start-up a probe chat must encode exactly as `apply_chat_template(tokenize=True)` does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from geval_server.engine.tokenization import Tokenization
from geval_server.scorers.process_reward.checkpoint import FLAG, ProcessRewardError

_MARK = "\x00GEVAL_PRM_{}\x00"
_MARKS = re.compile("\x00GEVAL_PRM_(\\d+)\x00")
PROBE_PROMPT = (("user", "What is 2 + 2?"),)
PROBE_STEPS = ("2 + 2 means adding two and two.", "So the answer is 4.")

Chat = Sequence[tuple[str, str]]  # (role, content) messages


class StepChatRefused(ValueError):
    """The model's chat template refuses this chat (a role it does not take, turns that do not alternate)."""


@dataclass(frozen=True)
class StepChat:
    ids: tuple[int, ...]
    tags: tuple[int, ...]  # the position of each step's tag in ids


class StepChatRenderer:
    def __init__(self, tokenization: Tokenization, tag: str) -> None:
        tokenizer = tokenization.tokenizer
        if not getattr(tokenizer, "chat_template", None):
            raise ProcessRewardError(f"{FLAG}: its tokenizer has no chat template, so the server cannot render a "
                                     "(prompt, steps) chat as the model was trained")
        if not tag:
            raise ProcessRewardError("--step-tag: must not be empty")
        tag_ids = tokenization.template(tag)
        if len(tag_ids) != 1:
            raise ProcessRewardError(f"--step-tag {tag!r}: encodes as {len(tag_ids)} tokens {tag_ids}; a PRM reads "
                                     "each step's score at one token (Qwen2.5-Math-PRM: <extra_0>)")
        self.tag, self.tag_id = tag, tag_ids[0]
        self.template = tokenizer.chat_template
        self._tok = tokenization
        self.trims = " y " not in self._text([("user", " x "), ("assistant", " y ")])
        probe = [*PROBE_PROMPT, ("assistant", "".join(step + tag for step in PROBE_STEPS))]
        expected = list(tokenizer.apply_chat_template([{"role": r, "content": c} for r, c in probe],
                                                      tokenize=True, return_dict=False))
        try:
            ours = self.render(PROBE_PROMPT, PROBE_STEPS)
        except StepChatRefused as error:
            raise ProcessRewardError(f"{FLAG}: the probe chat is refused: {error}") from error
        if list(ours.ids) != expected:
            raise ProcessRewardError(f"{FLAG}: the chat template's pieces do not encode as apply_chat_template does "
                                     f"({list(ours.ids)} against {expected}); this tokenizer is not served")

    def _text(self, chat: Chat) -> str:
        from jinja2 import TemplateError

        messages = [{"role": role, "content": content} for role, content in chat]
        try:
            return self._tok.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        except TemplateError as error:  # the template's own raise_exception: its words
            raise StepChatRefused(f"the process reward model's chat template refuses this chat: {error}") from error

    def render(self, prompt: Chat, steps: Sequence[str]) -> StepChat:
        """The chat's token ids and its tags' positions: template text trusted, contents and
        steps as plain text, each step followed by the tag's id."""
        contents = [content for _, content in prompt] + list(steps)
        answer = "".join(_MARK.format(len(prompt) + k) + self.tag for k in range(len(steps)))
        marked = [(role, _MARK.format(i)) for i, (role, _) in enumerate(prompt)] + [("assistant", answer)]
        pieces = _MARKS.split(self._text(marked))
        ids = self._tok.begin(pieces[0]) if pieces[0] else list(self._tok.bos)
        tags = []
        for k in range(1, len(pieces), 2):
            index, after = int(pieces[k]), pieces[k + 1]
            content = contents[index]
            ids += self._tok.user(content.strip() if self.trims else content)
            if index >= len(prompt):  # a step: its tag comes first in the template text after it
                if not after.startswith(self.tag):
                    raise StepChatRefused(f"the chat template does not write the tag {self.tag!r} after a step")
                tags.append(len(ids))
                ids.append(self.tag_id)
                after = after[len(self.tag):]
            if after:
                ids += self._tok.template(after)
        if len(tags) != len(steps):
            raise StepChatRefused(f"the chat template wrote {len(tags)} of the {len(steps)} steps")
        return StepChat(tuple(ids), tuple(tags))
