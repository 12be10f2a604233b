"""What the judge reads of a trainer's prompts and completions, which come as text or as
chat messages (TRL's conversational format: `[{"role": "assistant", "content": ...}]`)."""

from __future__ import annotations

from typing import Any


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
