"""A generative judge's own prompt and verdict, read exactly (scorers/template/kind.py)."""
