"""Every default the client, the adapters, the audit and the server's command line share."""

DEFAULT_PORT = 50051
DEFAULT_TARGET = f"localhost:{DEFAULT_PORT}"
# Deadline of one scoring call, gRPC's retries of it included: a large batch on a CPU judge
# takes minutes.
DEFAULT_TIMEOUT_S = 300.0
