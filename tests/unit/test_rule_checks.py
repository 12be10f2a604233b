"""Unit tests of the verifiable rules' checks (scorers/rules/checks.py): pure, no model."""

# Held out: written before math-verify was installed or any check was run; never tuned on.
# (completion, reference, expected pass)
HELD_OUT_MATH = [
    (r"so \boxed{\frac{3}{4}}", "0.75", True),
    (r"The answer is \boxed{\dfrac{2}{6}}", r"\frac{1}{3}", True),
    (r"\boxed{x = 5}", "5", True),
    (r"\boxed{\sqrt{12}}", r"2\sqrt{3}", True),
    (r"\boxed{(1, 3]}", "(1,3]", True),
    (r"\boxed{\{1,2,3\}}", r"\{3,2,1\}", True),
    (r"\boxed{50\%}", "50", True),
    (r"\boxed{-\frac{1}{2}}", "-0.5", True),
    (r"\boxed{2\pi}", r"\pi \cdot 2", True),
    (r"\boxed{x^2+2x+1}", "(x+1)^2", True),
    (r"\boxed{1000}", "1000.0", True),
    (r"\boxed{\frac{\sqrt{2}}{2}}", r"\frac{1}{\sqrt{2}}", True),
    (r"\boxed{3}", r"\boxed{3}", True),
    (r"\boxed{\infty}", r"\infty", True),
    (r"\boxed{\frac{1}{3}}", "0.33", False),
    (r"\boxed{7}", "8", False),
    (r"\boxed{2}", "-2", False),
    (r"\boxed{(2, 3)}", "(3, 2)", False),
    (r"\boxed{\sqrt{2}}", "1.41", False),
    (r"\boxed{[1, 3]}", "(1, 3)", False),
]
