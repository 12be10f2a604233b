"""The verifiable rules: pass/fail checks of a completion that need no model."""
