"""Unit tests of the verifiable rules' checks (scorers/rules/checks.py): pure, no model."""

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from geval_server.scorers.rules import checks
from geval_server.scorers.rules.checks import (
    ANSWER_LIMIT,
    PATTERN_LIMIT,
    JsonRule,
    RegexRule,
    RuleError,
    RuleTimeout,
    exact_match,
    final_answer,
    math_equal,
)

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


# -- final answers


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (r"so \boxed{\frac{1}{2}}.", (r"\frac{1}{2}", True)),
        (r"\boxed{x^{2} + {y}_{1}}", (r"x^{2} + {y}_{1}", True)),
        (r"first \boxed{1}, then \boxed{2}", ("2", True)),
        (r"\fbox{7}", ("7", True)),
        (r"\boxed{\{1, 2\}}", (r"\{1, 2\}", True)),
        (r"\boxed{\boxed{3}}", (r"\boxed{3}", True)),
        (r"\boxed{4} and then \boxed{5 + {", ("4", True)),
        (r"\boxed{5 + {", (r"\boxed{5 + {", False)),
        ("  The answer is 5.\n", ("The answer is 5.", False)),
        (r"} stray \boxed{6}", ("6", True)),
        ("", ("", False)),
    ],
)
def test_final_answer(completion, expected):
    assert final_answer(completion) == expected


# -- math


@pytest.mark.parametrize(
    ("completion", "reference"),
    [
        (r"\boxed{\frac{1}{2}}", "0.5"),
        (r"The answer is \boxed{3/4}", "0.75"),
        (r"\boxed{2\sqrt{2}}", r"\sqrt{8}"),
        (r"\boxed{\{1, 2, 3\}}", r"\{3, 1, 2\}"),
        (r"\boxed{[0, 1)}", "[0,1)"),
        (r"\boxed{25\%}", "25"),
        (r"\boxed{12}", r"the answer is \boxed{12}"),
        ("Adding them gives $x = 12$, so the answer is 12.", "12"),
    ],
)
def test_math_equal_passes_equal_values(completion, reference):
    verdict = math_equal(completion, reference)
    assert verdict.passed, verdict.reason
    assert " equals the reference " in verdict.reason


@pytest.mark.parametrize(
    ("completion", "reference"),
    [
        (r"\boxed{\frac{1}{3}}", "0.5"),
        (r"\boxed{2\sqrt{3}}", r"\sqrt{8}"),
        (r"\boxed{[0, 1]}", "[0,1)"),
        (r"\boxed{-4}", "4"),
        (r"\boxed{\text{no idea}}", "4"),
    ],
)
def test_math_equal_fails_other_values(completion, reference):
    verdict = math_equal(completion, reference)
    assert not verdict.passed
    assert " does not equal the reference " in verdict.reason


def test_math_equal_says_when_no_box_was_found():
    verdict = math_equal("I think it is 4", "4")
    assert verdict.reason.startswith("no \\boxed{} answer: compared the whole text")
    assert verdict.answer == "I think it is 4"


def test_math_equal_answer_is_cut():
    verdict = math_equal("\\boxed{" + "1+" * 300 + "1}", "301")
    assert verdict.passed
    assert len(verdict.answer) == ANSWER_LIMIT


@pytest.mark.parametrize("reference", ["", "   ", r"\boxed{}", r"\frac{"])
def test_math_equal_rejects_a_reference_that_is_not_math(reference):
    with pytest.raises(RuleError) as caught:
        math_equal(r"\boxed{1}", reference)
    assert caught.value.field == "reference"


@pytest.mark.parametrize("answer", [r"9^{9^{9^{9}}}", r"(10^{10})!", r"2^{2^{40}}"])
def test_pathological_math_times_out_and_the_next_check_runs(answer):
    with pytest.raises(RuleTimeout):
        math_equal(f"\\boxed{{{answer}}}", "3", time_limit_s=0.5)
    assert math_equal(r"\boxed{3}", "3").passed  # the killed worker was replaced


def test_math_equal_runs_off_the_main_thread():
    """The server calls checks from executor threads, where signal-based timeouts cannot work."""
    cases = [(rf"\boxed{{{n}/2}}", str(n / 2)) for n in range(8)]
    with ThreadPoolExecutor(4) as threads:
        verdicts = list(threads.map(lambda case: math_equal(*case), cases))
    assert all(verdict.passed for verdict in verdicts)


# -- exact match


@pytest.mark.parametrize(
    ("completion", "reference"),
    [
        (r"\boxed{Paris}", "paris"),
        (r"The capital is \boxed{\text{Paris}}", '"Paris."'),
        ("  New   York!  ", "new york"),
        (r"\boxed{$x+1$}", "x+1"),
        ("“Yes”?", "yes"),
        (r"\boxed{5!}", "5!"),
    ],
)
def test_exact_match_ignores_presentation(completion, reference):
    verdict = exact_match(completion, reference)
    assert verdict.passed, verdict.reason
    assert " matches the reference " in verdict.reason


@pytest.mark.parametrize(
    ("completion", "reference"),
    [
        (r"\boxed{5!}", "5"),  # a factorial's `!` is content
        (r"\boxed{1,000}", "1000"),
        (r"\boxed{x = 2}", "2"),
        (r"\boxed{New Yorker}", "New York"),
        (r"\boxed{\text{a} + \text{b}}", "a} + \\text{b"),
    ],
)
def test_exact_match_keeps_content(completion, reference):
    verdict = exact_match(completion, reference)
    assert not verdict.passed
    assert " does not match the reference " in verdict.reason


def test_exact_match_takes_the_reference_final_answer():
    assert exact_match(r"\boxed{B}", r"so the answer is \boxed{b}").passed


# -- regex


def test_regex_searches_anywhere():
    verdict = RegexRule(r"\d{3}").check("code 123 here")
    assert verdict.passed
    assert verdict.reason == "matches the pattern at 5-8: 123"


def test_regex_anchored_needs_the_whole_text():
    rule = RegexRule(r"^\d+$")
    assert rule.check("123").passed
    assert not rule.check("code 123").passed
    assert rule.check("code 123").reason == "no match for the pattern"


@pytest.mark.parametrize("pattern", ["(unclosed", "a{2,1}", "*a"])
def test_regex_bad_pattern_names_the_field(pattern):
    with pytest.raises(RuleError) as caught:
        RegexRule(pattern)
    assert caught.value.field == "regex"
    assert "not a valid pattern" in str(caught.value)


def test_regex_over_the_length_limit_names_the_limit():
    with pytest.raises(RuleError) as caught:
        RegexRule("a" * (PATTERN_LIMIT + 1))
    assert caught.value.field == "regex"
    assert str(PATTERN_LIMIT) in caught.value.message


def test_regex_catastrophic_backtracking_times_out():
    with pytest.raises(RuleTimeout):
        RegexRule(r"(a|aa)+$", time_limit_s=0.2).check("a" * 40 + "b")


def test_regex_nested_quantifier_the_engine_cuts_short_gives_a_verdict():
    assert not RegexRule(r"(a+)+$", time_limit_s=0.2).check("a" * 40 + "b").passed


# -- JSON

PERSON = json.dumps(
    {
        "type": "object",
        "required": ["age"],
        "properties": {
            "age": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
)


@pytest.mark.parametrize(
    "completion",
    ['{"age": 3}', '  {"age": 3}\n', '```json\n{"age": 3}\n```', '```\n{"age": 3}\n```', '\n```JSON\n{"age": 3}```\n'],
)
def test_json_accepts_the_text_or_one_fence(completion):
    verdict = JsonRule(PERSON).check(completion)
    assert verdict.passed, verdict.reason
    assert verdict.answer == '{"age": 3}'


@pytest.mark.parametrize(
    "completion",
    [
        'Here it is: {"age": 3}',
        'Here it is:\n```json\n{"age": 3}\n```',
        '```json\n{"age": 3}\n```\n```json\n{"age": 4}\n```',
        '```python\n{"age": 3}\n```',
        "NaN",
        "",
    ],
)
def test_json_rejects_prose_several_fences_and_non_json(completion):
    verdict = JsonRule(None).check(completion)
    assert not verdict.passed
    assert verdict.reason.startswith("not JSON: ")


def test_json_without_schema_passes_any_json():
    assert JsonRule(None).check("[1, 2]").reason == "valid JSON"


def test_json_parse_error_says_where():
    assert JsonRule(None).check("nope").reason == "not JSON: Expecting value: line 1 column 1 (char 0)"


@pytest.mark.parametrize(
    ("completion", "reason"),
    [
        ('{"name": "x"}', "schema: at $: 'age' is a required property"),
        ('{"age": -1}', "schema: at $.age: -1 is less than the minimum of 0"),
        ('{"age": 1, "tags": ["a", 2]}', "schema: at $.tags[1]: 2 is not of type 'string'"),
    ],
)
def test_json_schema_failure_names_the_path(completion, reason):
    verdict = JsonRule(PERSON).check(completion)
    assert not verdict.passed
    assert verdict.reason == reason


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ('{"type": 12}', "not a valid JSON Schema: at $.type"),
        ('{"type": ', "is not JSON"),
        ("[1, 2]", "a JSON Schema is an object or a boolean"),
    ],
)
def test_json_bad_schema_names_the_field(schema, says):
    with pytest.raises(RuleError) as caught:
        JsonRule(schema)
    assert caught.value.field == "schema"
    assert says in caught.value.message


def test_json_schema_refs_are_never_fetched():
    rule = JsonRule('{"properties": {"a": {"$ref": "https://example.com/a.json"}}}')
    with pytest.raises(RuleError) as caught:
        rule.check('{"a": 1}')
    assert caught.value.field == "schema"
    assert "only references inside the schema" in caught.value.message


def test_json_schema_pattern_that_backtracks_times_out():
    rule = JsonRule('{"properties": {"name": {"pattern": "^(a+)+$"}}}', time_limit_s=0.5)
    assert rule.check('{"name": "aaa"}').passed
    with pytest.raises(RuleTimeout):
        rule.check(json.dumps({"name": "a" * 40 + "b"}))


# -- held out


@pytest.mark.parametrize(("completion", "reference", "expected"), HELD_OUT_MATH)
def test_held_out_math(completion, reference, expected):
    assert math_equal(completion, reference).passed is expected


# -- workers


def _raise_in_worker():
    raise ValueError("boom")


def _exit_worker():
    os._exit(3)


@pytest.mark.parametrize(("job", "says"), [(_raise_in_worker, "ValueError('boom')"), (_exit_worker, "exited")])
def test_a_failing_worker_is_reported_and_replaced(job, says):
    with pytest.raises(RuntimeError, match=re.escape(says)):
        checks._pool.run(job, (), 5.0)
    assert math_equal(r"\boxed{2}", "2").passed


_BUSY_SERVER = """
import threading, time
from geval_server.scorers.rules import checks

if __name__ == "__main__":
    worker = checks._Worker()  # started and ready
    threading.Thread(target=worker.run, args=(time.sleep, (600,), 900), daemon=True).start()
    time.sleep(0.5)  # the job is sent and the worker is inside it
    print(worker._process.pid, flush=True)
    time.sleep(600)
"""


def test_a_worker_busy_in_a_check_ends_when_its_server_is_killed(tmp_path):
    """SIGKILL closes the pipe, which an idle worker hears but one inside a check does not."""
    import subprocess
    import sys
    import time

    import psutil

    script = tmp_path / "server.py"
    script.write_text(_BUSY_SERVER)
    server = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        worker = psutil.Process(int(server.stdout.readline()))
        time.sleep(1)
        assert worker.is_running()
    finally:
        server.kill()
        server.wait()
    _, alive = psutil.wait_procs([worker], timeout=30)
    assert not alive, f"the worker {worker.pid} outlived its server"
