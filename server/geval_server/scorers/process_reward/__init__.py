"""Process rewards: a reward per reasoning step (a process reward model in its own engine)."""
