"""What the trainer adapters share: the scoring core, per-sample rewards, failures, groups, row rubrics, logging."""
