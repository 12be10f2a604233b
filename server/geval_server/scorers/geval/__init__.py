"""G-Eval: the rubric, its prompt, its score slot and the label read, its generated steps, and callers' rubrics."""
