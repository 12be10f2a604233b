"""The documented entry point for OpenRLHF, `geval_client.openrlhf`; the code is trainers/openrlhf.py.

Imports are absolute so that OpenRLHF can load this file by its path (`--reward.remote_url FILE.py`)."""

from geval_client.trainers.openrlhf import make_reward_func, reward_func

__all__ = ["make_reward_func", "reward_func"]
