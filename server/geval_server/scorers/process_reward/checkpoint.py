"""What the server checks of a process reward model before its engine starts: that vLLM's
pooling runner serves it as a PRM (a head on every token, read at the step tags), and that it
has the two classes whose second is P(good), as Qwen2.5-Math-PRM's head has."""

from __future__ import annotations

from dataclasses import dataclass

FLAG = "--process-reward-model"
# The PRM architectures vLLM 0.32 serves with its STEP pooler (model_executor/models/qwen2_rm.py).
PRM_ARCHITECTURES = ("Qwen2ForProcessRewardModel",)
GOOD = 1  # the class whose probability is the step's score (Qwen2.5-Math-PRM: softmax, index 1)


class ProcessRewardError(ValueError):
    """A checkpoint or step tag the process-reward scorer cannot serve; the message names the flag."""


@dataclass(frozen=True)
class Checkpoint:
    path: str
    architecture: str


def read_checkpoint(path: str, trust_remote_code: bool = False) -> Checkpoint:
    """The checkpoint's architecture, from its config; ProcessRewardError for a model that is no PRM."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as error:
        raise ProcessRewardError(f"{FLAG} {path}: cannot read its config: {error}") from error
    architectures = list(getattr(config, "architectures", None) or [])
    served = [name for name in architectures if name in PRM_ARCHITECTURES]
    if not served:
        raise ProcessRewardError(
            f"{FLAG} {path}: not a process reward model (its config's architectures are {architectures}; vLLM's "
            f"pooling runner reads step scores from {list(PRM_ARCHITECTURES)}, as Qwen2.5-Math-PRM ships)")
    labels = getattr(config, "num_labels", 2)
    if labels != 2:
        raise ProcessRewardError(f"{FLAG} {path}: its head has {labels} classes; a step's score is P(good), the "
                                 "second of two")
    return Checkpoint(path, served[0])
