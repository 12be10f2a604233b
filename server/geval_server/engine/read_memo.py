"""Slot reads already made, kept so that the same prompt read again gets the same answer.

vLLM computes a request in whatever batch it lands in, and the batch's shape moves the
numbers: the same four comparison prompts, read warm in two calls, moved a group's reward by
3.5e-3 in bfloat16 and 1.2e-6 in float32 (the groupwise reorder test, on a CPU). Keeping each
read's answer makes a reward a function of its prompts while the answer is kept: a group sent
again in another order, a retried call or an audit re-reading an item gets bit-identical
probabilities, and the engine is not asked again.

Only exact next-token reads (`JudgeEngine.token_logprobs`) are kept: they are what every
G-Eval, chained-label and comparison score is made of. A key is Python's 64-bit hash of the
prompt's and the labels' token ids (vLLM's prefix cache keys its blocks the same way by
default): 9 us for a 1,600-token SummEval prompt where a blake2b digest of the ids took 106 us.
A kept read costs 0.46 KB whatever the prompt's length when it holds 5 labels' tokens, 15.6 KB
when it holds 257 (Gemma-4's tokens that begin with a digit): 3.8 MB and 128 MB at the default
size. Two of 8,192 kept reads collide with odds of about 2e-12.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

# Reads kept: a GRPO step of 8x8 completions on 4 rubrics makes 256, compared in all pairs 1,792.
DEFAULT_SIZE = 8192


class ReadMemo:
    """The last `size` reads, least recently used forgotten first; size 0 keeps none."""

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        if size < 0:
            raise ValueError(f"read memo size must be >= 0, got {size}")
        self.size = size
        self._kept: OrderedDict[int, dict[int, float]] = OrderedDict()

    @staticmethod
    def key(prompt_ids: Sequence[int], token_ids: Sequence[int]) -> int:
        return hash((tuple(prompt_ids), tuple(token_ids)))

    def get(self, key: int) -> dict[int, float] | None:
        answer = self._kept.get(key)
        if answer is not None:
            self._kept.move_to_end(key)
        return answer

    def keep(self, key: int, answer: dict[int, float]) -> dict[int, float]:
        """Keeps `answer` unless a read of the same prompt finished first (two in flight at
        once): then that one is returned, so both callers see the same numbers."""
        if not self.size:
            return answer
        kept = self._kept.setdefault(key, answer)
        self._kept.move_to_end(key)
        if len(self._kept) > self.size:
            self._kept.popitem(last=False)
        return kept
