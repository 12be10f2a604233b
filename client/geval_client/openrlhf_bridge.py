"""The documented command, `python -m geval_client.openrlhf_bridge`; its code is trainers/openrlhf_bridge.py."""

import sys

from geval_client.trainers.openrlhf_bridge import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
