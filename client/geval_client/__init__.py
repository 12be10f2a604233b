"""Light client for the G-Eval reward server: grpcio, protobuf and numpy only."""

from .client import AsyncRewardClient, RewardClient
from .defaults import DEFAULT_TARGET, DEFAULT_TIMEOUT_S
from .errors import ItemNotScored, RewardServerError
from .requests import make_item
from .retry import RetryPolicy
from .trainers.trl import AsyncGEvalReward, AsyncGroupwiseReward, GEvalReward, GroupwiseReward
from .transport import TLSOptions
from .types import (
    BoundSummary,
    GEvalScore,
    GroupResult,
    ItemError,
    ItemResult,
    LikelihoodScore,
    Logprobs,
    ProcessRewardScore,
    Reasoning,
    RewardModelScore,
    RuleScore,
    Sampling,
    SemScore,
    bound_summaries,
)

__all__ = [
    "DEFAULT_TARGET",
    "DEFAULT_TIMEOUT_S",
    "AsyncGEvalReward",
    "AsyncGroupwiseReward",
    "AsyncRewardClient",
    "BoundSummary",
    "GEvalReward",
    "GEvalScore",
    "GroupResult",
    "GroupwiseReward",
    "ItemError",
    "ItemNotScored",
    "ItemResult",
    "LikelihoodScore",
    "ProcessRewardScore",
    "RewardModelScore",
    "RuleScore",
    "Logprobs",
    "Reasoning",
    "RetryPolicy",
    "RewardClient",
    "RewardServerError",
    "Sampling",
    "SemScore",
    "TLSOptions",
    "bound_summaries",
    "make_item",
]
