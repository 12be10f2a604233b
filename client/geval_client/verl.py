"""The documented entry point for veRL, `pkg://geval_client.verl` (or this file's path); the code is trainers/verl.py.

Imports are absolute so that veRL can load this file by its path as well as by its name."""

from geval_client.trainers.verl import (
    StepRewardManager,
    compute_score,
    compute_score_async,
    compute_score_batch,
    compute_score_batch_groupwise,
    compute_score_prime,
    compute_score_rate_limited,
)

__all__ = [
    "StepRewardManager",
    "compute_score",
    "compute_score_async",
    "compute_score_batch",
    "compute_score_batch_groupwise",
    "compute_score_prime",
    "compute_score_rate_limited",
]
