"""The judge: a checked request in, one reward per item out (plan the reads, read, bound, weigh)."""
