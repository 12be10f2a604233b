"""The documented entry point `geval_client.trainer_text`; the code is trainers/shared/trainer_text.py."""

from geval_client.trainers.shared.trainer_text import completion_text, judge_prompt, message_text

__all__ = ["completion_text", "judge_prompt", "message_text"]
