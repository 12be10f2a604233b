"""Trainer adapters, one module per trainer (or per way a trainer takes a reward); what they share is in shared/."""
