"""Process rewards from the judge: a G-Eval step rubric read once per reasoning step."""
