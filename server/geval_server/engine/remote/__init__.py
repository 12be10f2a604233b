"""The judge on an OpenAI-compatible inference server the user already runs (serve --judge-url)."""
