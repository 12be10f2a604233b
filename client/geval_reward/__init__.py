"""The `geval-reward` command: one entry point for the server and the audits, depending on neither."""
