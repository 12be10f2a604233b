"""Offline reward audits (`geval-reward audit`): self-preference against human
references, length bias, SemScore and agreement with human ratings, computed
from a data set scored through the reward server."""
