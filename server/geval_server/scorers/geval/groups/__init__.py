"""G-Eval rubrics compared within a group: the comparison prompt, its reads, and the bound around them."""
