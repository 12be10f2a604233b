"""What the judge reads of a trainer's prompts and completions, which come as text or as
chat messages (TRL's conversational format: `[{"role": "assistant", "content": ...}]`)."""

from __future__ import annotations

import re
from typing import Any

# Tokens that end a turn or a sequence, as tokenizers write them when decoding with
# special tokens kept: <|im_end|>, <|endoftext|>, <|eot_id|>, </s>, <eos>, <end_of_turn>,
# <｜end▁of▁sentence｜>.
_END_MARKERS = re.compile(r"(?:\s*(?:<\|[A-Za-z0-9_]+\|>|</s>|<eos>|<end_of_turn>|<｜[^<>｜]{1,40}｜>))+\s*\Z")


def judge_prompt(prompt: Any) -> str | list[dict[str, str]]:
    """Text stays text; chat messages keep their roles, with content flattened to text."""
    if isinstance(prompt, str):
        return prompt
    return [{"role": message["role"], "content": message_text(message.get("content"))} for message in prompt]


def completion_text(completion: Any) -> str:
    """A conversational completion is the text of its assistant messages."""
    if isinstance(completion, str):
        return completion
    return "\n".join(
        text for message in completion
        if message.get("role") == "assistant" and (text := message_text(message.get("content")))
    )


def message_text(content: Any) -> str:
    """Content is a string, or a list of blocks of which the text ones count."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")


def without_end_markers(text: str) -> str:
    """A completion decoded with its special tokens kept (OpenRLHF's query, AReaL's completions),
    without the end-of-turn and end-of-sequence markers that close it: the judge reads them as text."""
    return _END_MARKERS.sub("", text).strip()
