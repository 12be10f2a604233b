"""The checks behind the `rules` scorers: each gives pass or fail on one completion and says why.

math_equal and exact_match compare the completion's final answer with a reference; RegexRule and
JsonRule check the completion itself. A check that cannot run because of the rule (a bad pattern, a
schema that is not JSON Schema, a reference that is not math) raises RuleError naming the field; a
check that runs past its time bound raises RuleTimeout and never stalls its caller.

Time bounds: the `regex` package checks its own timeout while matching, off the main thread too.
math-verify bounds time with signal.alarm, which works only on the main thread, would replace an
asyncio server's signal handling, and cannot interrupt sympy inside C (`9^{9^{9^{9}}}` never returns
from a comparison), so math comparisons, and schema validation (a schema's `pattern` runs on Python's
`re`, which has no timeout), run in worker processes that are killed and replaced when they overrun.
The workers are spawned, like vLLM's, so a script that calls these checks needs the usual
`if __name__ == "__main__":` guard (the server's command line has it).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from functools import lru_cache

import referencing
import regex
from jsonschema import exceptions as jsonschema_errors
from jsonschema import validators
from referencing.exceptions import Unresolvable

ANSWER_LIMIT = 200  # Verdict.answer is cut to this many characters
PATTERN_LIMIT = 2000  # characters in a regex rule; far beyond any format check, short of a pasted corpus
MATH_TIME_LIMIT_S = 3.0  # a comparison takes 1-4 ms (EPYC core); sympy on a huge power never returns
REGEX_TIME_LIMIT_S = 1.0  # a sane pattern searches a long completion in milliseconds
SCHEMA_TIME_LIMIT_S = 2.0  # validation is linear in the document unless the schema's own patterns backtrack
WORKERS = min(4, os.cpu_count() or 1)  # concurrent bounded checks; more would take cores from the engine
_ORPHAN_POLL_S = 0.5
_WORKER_START_LIMIT_S = 120.0  # a fresh worker imports sympy and math-verify: 0.6 s idle, far more on a loaded host
_QUOTED = 60  # characters of an answer or reference quoted in a reason


@dataclass(frozen=True)
class Verdict:
    """One check's outcome. reason is one line a user reads beside the score; answer is the text
    the check compared (the final answer, or the completion for regex and JSON), cut to ANSWER_LIMIT."""

    passed: bool
    reason: str
    answer: str


class RuleError(ValueError):
    """The rule itself cannot run, whatever the completion: the caller's to fix. field names the
    rule's field ("regex", "schema", "reference"); the caller prefixes the request path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


class RuleTimeout(RuntimeError):
    """The check ran past its time bound on this completion."""


# -- final answers -----------------------------------------------------------------------------

# Only the tokens that matter to brace balance: box openers, escaped braces and backslashes (which
# group nothing), and bare braces. Literal alternatives, so the scan is linear.
_BRACE_TOKENS = re.compile(r"\\(?:boxed|fbox)\{|\\[{}\\]|[{}]")


def final_answer(completion: str) -> tuple[str, bool]:
    """The content of the last \\boxed{...} (or \\fbox{...}) that closes, stripped, and True; else
    the whole text stripped and False. "Last" is the box that closes last, so a box nested in
    another yields the outer one; a box never closed (a generation cut off mid-answer) is skipped,
    as it holds no whole answer. `\\{` and `\\}` are literal braces in LaTeX and do not count."""
    open_boxes: list[tuple[int, int]] = []  # (brace depth inside the box, where its content starts)
    depth, last = 0, None
    for token in _BRACE_TOKENS.finditer(completion):
        text = token.group()
        if text.endswith("{") and not text.startswith("\\{"):
            depth += 1
            if len(text) > 1:
                open_boxes.append((depth, token.end()))
        elif text == "}" and depth > 0:
            if open_boxes and open_boxes[-1][0] == depth:
                last = (open_boxes.pop()[1], token.start())
            depth -= 1
    if last is None:
        return completion.strip(), False
    return completion[last[0] : last[1]].strip(), True


def _quote(text: str, limit: int = _QUOTED) -> str:
    """text on one line, cut to limit characters, for a reason."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _answered(answer: str, boxed: bool) -> tuple[str, str]:
    """The answer for Verdict.answer, and how the reason introduces it."""
    intro = "final answer" if boxed else "no \\boxed{} answer: compared the whole text"
    return answer[:ANSWER_LIMIT], intro


# -- bounded work in worker processes ------------------------------------------------------------


def _serve(connection) -> None:
    """A worker's loop: run each (function, args) sent and send back its result. It imports and
    warms math-verify first, so no check pays sympy's start-up inside its time bound."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server stops its workers itself, on its own ^C
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout disabled": this process is the bound
    _math_job("1/2", True, "0.5")
    connection.send((True, "ready"))
    while True:
        function, args = connection.recv()
        try:
            connection.send((True, function(*args)))
        except Exception as error:  # the caller hears of it; the worker is replaced
            connection.send((False, repr(error)))


def _exit_when_orphaned(parent: int) -> None:
    """Ends the worker once its server is gone. A server killed outright (SIGKILL, the OOM
    killer) closes the pipe, which ends an idle worker, but not one busy in a check that sympy
    cannot interrupt; such a worker would hold the server's output open and keep a supervisor
    (a Ray actor, a shell pipe) from seeing the server die. PR_SET_PDEATHSIG would fire when
    the thread that spawned the worker ends, not the server, so the parent is watched instead."""
    while os.getppid() == parent:
        time.sleep(_ORPHAN_POLL_S)
    os._exit(0)


class _Worker:
    """One spawned process (spawn, not fork: the server's threads and event loop must not be copied)."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child,), name="geval-rule-checks", daemon=True)
        self._process.start()
        child.close()
        try:
            if not self._connection.poll(_WORKER_START_LIMIT_S):
                raise RuntimeError(f"the rule checks' worker did not start within {_WORKER_START_LIMIT_S:.0f} s")
            self._receive()
        except BaseException:
            self.kill()
            raise

    def run(self, function, args: tuple, time_limit_s: float):
        """function(*args) in the worker; RuleTimeout past time_limit_s. After any exception the
        worker is in an unknown state: the caller kills it."""
        self._connection.send((function, args))
        if not self._connection.poll(time_limit_s):
            raise RuleTimeout(f"the check ran past its time bound of {time_limit_s:g} s")
        return self._receive()

    def _receive(self):
        try:
            succeeded, value = self._connection.recv()
        except EOFError:
            raise RuntimeError(
                "the rule checks' worker exited (killed for memory? started from a script without "
                "`if __name__ == '__main__':`?)"
            ) from None
        if not succeeded:
            raise RuntimeError(f"the rule check failed in its worker: {value}")
        return value

    def kill(self) -> None:
        """Ends the process; safe to call again."""
        self._process.kill()
        self._process.join()
        self._connection.close()


class _Pool:
    """Up to `size` workers, each lent to one check at a time; a killed one is replaced when next
    needed. Waiting for a free worker, and a fresh worker's start, do not count against a bound."""

    def __init__(self, size: int) -> None:
        self._size, self._started, self._idle = size, 0, []
        self._free = threading.Condition()

    def run(self, function, args: tuple, time_limit_s: float):
        with self._free:
            self._free.wait_for(lambda: self._idle or self._started < self._size)
            worker = self._idle.pop() if self._idle else None
            if worker is None:
                self._started += 1
        alive = False
        try:
            worker = worker or _Worker()
            result = worker.run(function, args, time_limit_s)
            alive = True
            return result
        finally:
            if not alive and worker is not None:
                worker.kill()
            with self._free:
                if alive:
                    self._idle.append(worker)
                else:
                    self._started -= 1
                self._free.notify()


_pool = _Pool(WORKERS)


# -- math ----------------------------------------------------------------------------------------


def _parse_math(answer: str, boxed: bool) -> list:
    """math-verify's reading of an answer: a boxed answer parsed whole (wrapped in \\boxed{} again,
    its most reliable extraction); else math-verify finds the answer in the text itself."""
    from math_verify import parse

    return parse(f"\\boxed{{{answer}}}" if boxed else answer, fallback_mode="no_fallback", parsing_timeout=None)


def _math_job(answer: str, boxed: bool, reference: str) -> bool | None:
    """In a worker: None when the reference is not math, else whether the answer equals it."""
    from math_verify import verify

    gold = _parse_math(reference, True)
    if not gold:
        return None
    return verify(gold, _parse_math(answer, boxed), timeout_seconds=None)


def math_equal(completion: str, reference: str, time_limit_s: float = MATH_TIME_LIMIT_S) -> Verdict:
    """Whether the completion's final answer equals the reference mathematically (math-verify: 3/4
    equals 0.75, \\sqrt{8} equals 2\\sqrt{2}, sets and intervals compare as such). A reference in a
    \\boxed{} counts by its final answer too. Without a box, math-verify reads the last answer it
    finds in the text. RuleError("reference") when the reference cannot be read as math."""
    expected, _ = final_answer(reference)
    if not expected:
        raise RuleError("reference", "is empty: math-equal compares with a reference answer")
    answer, boxed = final_answer(completion)
    shown, intro = _answered(answer, boxed)
    passed = _pool.run(_math_job, (answer, boxed, expected), time_limit_s)
    if passed is None:
        raise RuleError("reference", f"{_quote(expected)} cannot be read as math")
    verb = "equals" if passed else "does not equal"
    return Verdict(passed, f"{intro} {_quote(answer)} {verb} the reference {_quote(expected)}", shown)


# -- exact match ---------------------------------------------------------------------------------

_QUOTE_PAIRS = {'"': '"', "'": "'", "`": "`", "“": "”", "‘": "’", "«": "»"}
_END_PUNCTUATION = ".,;:?!"


def _unwrap(text: str) -> str:
    """text without one wrapper that only presents it: $...$, \\text{...} around all of it, quotes."""
    for opener, closer in (("$$", "$$"), ("$", "$"), ("\\text{", "}"), *_QUOTE_PAIRS.items()):
        if len(text) > len(opener) + len(closer) - 1 and text.startswith(opener) and text.endswith(closer):
            inner = text[len(opener) : -len(closer)]
            if closer != "}" or final_answer(f"\\boxed{{{inner}}}") == (inner.strip(), True):
                return inner  # for \text{}: only when its brace is the last one, not `\text{a} + \text{b}`
    return text


def _strip_end(text: str) -> str:
    """text without sentence punctuation at its end; a `!` after a digit or bracket is a factorial, kept."""
    while text and text[-1] in _END_PUNCTUATION:
        if text[-1] == "!" and len(text) > 1 and (text[-2].isdigit() or text[-2] in ")]}"):
            break
        text = text[:-1]
    return text


def _normalized(text: str) -> str:
    """Presentation removed, content kept: case folded, whitespace runs as one space, end
    punctuation, and wrappers ($...$, \\text{...}, quotes) around the whole answer, repeatedly, so
    `"Paris."` and `\\text{paris}` both read `paris`. Nothing inside an answer changes: `1,000` and
    `1000`, or `x=2` and `2`, differ here; math_equal is the check for equal values."""
    previous = None
    while text != previous:
        previous = text
        text = _unwrap(_strip_end(" ".join(text.split())))
    return text.casefold()


def exact_match(completion: str, reference: str) -> Verdict:
    """Whether the completion's final answer equals the reference's after normalizing presentation
    (_normalized: case, whitespace, end punctuation, wrapping quotes and math delimiters)."""
    expected, _ = final_answer(reference)
    answer, boxed = final_answer(completion)
    shown, intro = _answered(answer, boxed)
    passed = _normalized(answer) == _normalized(expected)
    verb = "matches" if passed else "does not match"
    return Verdict(passed, f"{intro} {_quote(answer)} {verb} the reference {_quote(expected)}", shown)


# -- regex ---------------------------------------------------------------------------------------


class RegexRule:
    """Passes when the pattern matches anywhere in the completion (a search, as `re.search`):
    anchor it with ^...$ to require the whole text, and add (?m) for ^ and $ to match at lines.
    The `regex` package's syntax (a superset of `re`'s) with its own timeout, so a pattern that
    backtracks catastrophically ends in RuleTimeout instead of holding a core."""

    def __init__(self, pattern: str, time_limit_s: float = REGEX_TIME_LIMIT_S) -> None:
        if len(pattern) > PATTERN_LIMIT:
            raise RuleError("regex", f"is {len(pattern)} characters long; the limit is {PATTERN_LIMIT}")
        try:
            self._pattern = regex.compile(pattern)
        except (regex.error, OverflowError, RecursionError) as error:
            raise RuleError("regex", f"is not a valid pattern: {error}") from None
        self._time_limit_s = time_limit_s

    def check(self, completion: str) -> Verdict:
        try:
            match = self._pattern.search(completion, timeout=self._time_limit_s)
        except TimeoutError:
            raise RuleTimeout(f"the pattern ran past its time bound of {self._time_limit_s:g} s") from None
        if match is None:
            return Verdict(False, "no match for the pattern", completion[:ANSWER_LIMIT])
        reason = f"matches the pattern at {match.start()}-{match.end()}: {_quote(match.group())}"
        return Verdict(True, reason, completion[:ANSWER_LIMIT])


# -- JSON ----------------------------------------------------------------------------------------


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")  # Python's json reads NaN and Infinity; JSON has neither


def _json_text(completion: str) -> str:
    """The JSON text of a completion: all of it, or the inside of one ``` fence (tagged json, or
    untagged) that is all of it, whitespace aside. A fence is how chat models present JSON and what
    every JSON consumer strips; prose around it, or two blocks, is not a JSON answer."""
    text = completion.strip()
    if not (text.startswith("```") and text.endswith("```") and len(text) >= 6 and "\n" in text):
        return text
    opener, body = text[3:-3].split("\n", 1)
    if opener.strip().lower() not in ("", "json") or "```" in body:
        return text
    return body.strip()


@lru_cache(maxsize=64)
def _validator(schema_text: str):
    """The schema's validator, built once per worker. Formats are asserted (a caller who writes
    "format": "date" means it), and $ref resolves inside the schema only: never fetched from the network."""
    schema = json.loads(schema_text)
    cls = validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER, registry=referencing.Registry())


def _schema_job(schema_text: str, document) -> tuple[str, str] | None:
    """In a worker: None when the document is valid, else (field, message), field "" for the document."""
    try:
        error = jsonschema_errors.best_match(_validator(schema_text).iter_errors(document))
    except Unresolvable as unresolvable:
        return "schema", f"$ref {unresolvable} cannot be resolved: only references inside the schema are followed"
    return None if error is None else ("", f"schema: at {error.json_path}: {_quote(error.message, 150)}")


class JsonRule:
    """Passes when the completion is JSON (all of it, or one ```json fence that is all of it, see
    _json_text) and, given a schema, valid under it; the reason names the failing path."""

    def __init__(self, schema: str | None, time_limit_s: float = SCHEMA_TIME_LIMIT_S) -> None:
        self._schema, self._time_limit_s = schema, time_limit_s
        if schema is None:
            return
        try:
            parsed = json.loads(schema, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as error:
            raise RuleError("schema", f"is not JSON: {error}") from None
        if not isinstance(parsed, (dict, bool)):
            raise RuleError("schema", f"is a JSON {type(parsed).__name__}; a JSON Schema is an object or a boolean")
        try:
            validators.validator_for(parsed).check_schema(parsed)
        except jsonschema_errors.SchemaError as error:
            raise RuleError("schema", f"is not a valid JSON Schema: at {error.json_path}: {error.message}") from None

    def check(self, completion: str) -> Verdict:
        text = _json_text(completion)
        shown = text[:ANSWER_LIMIT]
        try:
            document = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as error:
            return Verdict(False, f"not JSON: {_quote(str(error) or 'nested too deeply', 150)}", shown)
        if self._schema is None:
            return Verdict(True, "valid JSON", shown)
        failure = _pool.run(_schema_job, (self._schema, document), self._time_limit_s)
        if failure is None:
            return Verdict(True, "valid JSON, valid under the schema", shown)
        field, message = failure
        if field:
            raise RuleError(field, message)
        return Verdict(False, message, shown)
