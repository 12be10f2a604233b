"""The documented entry point for TRL, `geval_client.trl`; the code is trainers/trl.py."""

from geval_client.trainers.trl import AsyncGEvalReward, AsyncGroupwiseReward, GEvalReward, GroupwiseReward

__all__ = ["AsyncGEvalReward", "AsyncGroupwiseReward", "GEvalReward", "GroupwiseReward"]
