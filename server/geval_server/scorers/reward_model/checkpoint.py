"""What the server checks of a reward-model checkpoint before its engine starts: that it is a
sequence classifier, and the names of its heads."""

from __future__ import annotations

from dataclasses import dataclass

FLAG = "--reward-model"


class RewardModelError(ValueError):
    """A checkpoint or choice the reward-model scorer cannot serve; the message names the flag."""


@dataclass(frozen=True)
class Checkpoint:
    path: str
    architecture: str
    heads: tuple[str, ...]  # every output's name (id2label), in the model's order
    head: int  # the output the reward is made from


def read_checkpoint(path: str, head: str | None = None, trust_remote_code: bool = False) -> Checkpoint:
    """The checkpoint's architecture and heads, from its config; raises RewardModelError for a
    model that is not a `*ForSequenceClassification` or a head it does not have."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as error:
        raise RewardModelError(f"{FLAG} {path}: cannot read its config: {error}") from error
    architectures = list(getattr(config, "architectures", None) or [])
    classifiers = [name for name in architectures if name.endswith("ForSequenceClassification")]
    if not classifiers:
        raise RewardModelError(
            f"{FLAG} {path}: not a sequence classifier (its config's architectures are {architectures}; a reward "
            "model served here is a *ForSequenceClassification checkpoint, as Skywork-Reward or ArmoRM ship)")
    names = tuple(str(config.id2label[i]) for i in range(config.num_labels))
    if len(set(names)) != len(names):
        names = tuple(f"{name}#{i}" for i, name in enumerate(names))
    if head is None:
        index = 0
    elif head in names:
        index = names.index(head)
    else:
        raise RewardModelError(f"--reward-model-head {head!r}: the model's heads are {list(names)}")
    return Checkpoint(path, classifiers[0], names, index)
