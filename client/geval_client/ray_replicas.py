"""The documented entry point `geval_client.ray_replicas`; the code is fleet/ray_replicas.py."""

from geval_client.fleet.ray_replicas import RayReplicas

__all__ = ["RayReplicas"]
