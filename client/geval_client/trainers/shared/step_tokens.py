"""A process reward placed on a response's tokens, for trainers that take a reward per token:
each step's score on the last token of its step.

The server gives each step's [start, end) in characters of the completion it scored; a
trainer holds token ids. A step ends on the first token whose decoded prefix of the response
holds the whole step: decoding prefixes, not re-encoding the text, keeps the ids the policy
wrote (a re-encoding may split the text differently), and a character cut between two
byte-level tokens (an accented letter, an emoji) decodes to a replacement character, not to
the step's text, so the step ends on the token that completes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .scoring import SampleReward


def step_ends(text: str, spans: Sequence[tuple[int, int]], prefix: Callable[[int], str], tokens: int) -> list[int]:
    """The index of each step's last token. text: the completion the spans index; prefix(k):
    the first k tokens decoded as the trainer decoded the whole response; tokens: how many.
    Binary search per step (a prefix that holds text[:end] still holds it with more tokens),
    so a step costs log2(tokens) decodes. A step the decoding never reproduces (a tokenizer
    whose prefixes decode unlike its whole) ends on the last token."""
    ends = []
    for _, end in spans:
        wanted, low, high = text[:end], 1, tokens
        while low < high:
            middle = (low + high) // 2
            if prefix(middle).startswith(wanted):
                high = middle
            else:
                low = middle + 1
        ends.append(low - 1)
    return ends


def token_rewards(reward: SampleReward, text: str, prefix: Callable[[int], str], tokens: int) -> dict[int, float]:
    """{token index: reward} for one response of `tokens` tokens: each step's score on its last
    token, where the sample was scored by a process reward; otherwise (failed, gated, or no
    process reward among its rubrics) the sample's reward on the last token, as a trainer
    places an outcome reward (index -1 for an empty response, as veRL's managers write it).
    Two steps that end on one token add up there.

    A process reward weighed with other rubrics is refused: the item's reward is their weighted
    mean, and no placement of the step scores keeps the other rubrics' share."""
    if reward.failed or not reward.step_scores:
        return {tokens - 1: reward.reward}
    if len(reward.rubric_rewards) > 1:
        raise ValueError(
            f"step rewards on tokens need the process reward as the only rubric; this sample was scored by "
            f"{sorted(reward.rubric_rewards)}: score the other rubrics apart, or train on the reduced reward"
        )
    placed: dict[int, float] = {}
    for end, score in zip(step_ends(text, reward.step_spans, prefix, tokens), reward.step_scores):
        placed[end] = placed.get(end, 0.0) + score
    return placed
