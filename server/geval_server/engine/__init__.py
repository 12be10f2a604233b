"""The judge engine: the protocol the server drives, the vLLM driver, a null engine, and
what they need (tokenizer, number format, flags, read memo)."""
