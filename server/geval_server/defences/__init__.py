"""What guards the score slot against completions written to sway it; chain.py applies them in order."""
