"""What pip prints when the package index cannot be reached: the tests that fetch from PyPI skip then, naming why."""

NETWORK_FAILURES = ("Could not find a version", "No matching distribution", "NewConnectionError",
                    "Failed to establish a new connection", "Temporary failure in name resolution",
                    "Network is unreachable", "ProxyError", "timed out")
