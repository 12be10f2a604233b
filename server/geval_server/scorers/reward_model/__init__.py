"""The reward-model scorer: a trained sequence classifier served beside the judge."""
