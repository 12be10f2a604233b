"""A fleet of judge replicas, and every rule for spreading calls over it; a new balancing rule goes in plan.py."""
