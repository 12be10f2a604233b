"""The likelihood scorer (GPTScore-style): its spec, the read, and the copy and repetition guards."""
