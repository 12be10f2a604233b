"""Verifiable rules as a kind (scorers/kind.py): `math-equal` and `exact-match` served on
every server (no flag, no model), and rules sent inline (RubricSelection.rule): `regex`, the
completion matches; `json`, it parses and validates against the schema given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from geval_client.pb import reward_pb2

from geval_server.scorers.kind import ScorerKind, Served, SpecError, StartContext
from geval_server.scorers.rules.checks import JsonRule, RegexRule, RuleError, exact_match, math_equal
from geval_server.scorers.rules.scorer import KIND, RuleDetails, RuleScorer

MATH_EQUAL, EXACT_MATCH = "math-equal", "exact-match"
_FINAL = "the completion's final answer (its last \\boxed{}, else the whole text)"


@dataclass(frozen=True)
class RegexSpec:
    wire_field: ClassVar[str] = "rule"  # sent inline in RubricSelection.rule
    name: str
    pattern: str
    uses_reference: bool = False


@dataclass(frozen=True)
class JsonSpec:
    wire_field: ClassVar[str] = "rule"
    name: str
    schema: str | None
    uses_reference: bool = False


def served_rules() -> list[RuleScorer]:
    return [
        RuleScorer(MATH_EQUAL, math_equal, True, RuleDetails(
            MATH_EQUAL, f"1 when {_FINAL} is mathematically equal to the reference's (math-verify), else 0")),
        RuleScorer(EXACT_MATCH, exact_match, True, RuleDetails(
            EXACT_MATCH, f"1 when {_FINAL} equals the reference after normalizing case, whitespace and end "
                         "punctuation, else 0")),
    ]


def regex_scorer(spec: RegexSpec) -> RuleScorer:
    rule = RegexRule(spec.pattern)
    return RuleScorer(spec.name, lambda completion, _: rule.check(completion), False, RuleDetails(
        "regex", "1 when the pattern matches the completion (anywhere; anchor with ^ and $), else 0", spec.pattern))


def json_scorer(spec: JsonSpec) -> RuleScorer:
    rule = JsonRule(spec.schema)
    described = "and validates against the schema " if spec.schema is not None else ""
    return RuleScorer(spec.name, lambda completion, _: rule.check(completion), False, RuleDetails(
        "json", f"1 when the completion parses as JSON {described}(alone or as one ```json block), else 0",
        schema=spec.schema or ""))


async def _inline(spec: RegexSpec | JsonSpec) -> RuleScorer:
    return regex_scorer(spec) if isinstance(spec, RegexSpec) else json_scorer(spec)


class RulesKind(ScorerKind):
    name = KIND
    inline_field = "rule"

    async def start(self, settings: Any, context: StartContext) -> Served:
        """The served rules. The math workers (checks.py) start at the first math-equal check, not
        here: a worker outlives a server killed with SIGKILL, and a supervisor that waits for the
        server's output to close (a Ray actor replica) would then never see it die."""
        return Served(served_rules(), inline={RegexSpec: _inline, JsonSpec: _inline})

    def inline_from_wire(self, rule: reward_pb2.RuleSpec, limits: Any) -> RegexSpec | JsonSpec:
        """A rule sent with the request, compiled here so that a bad pattern or schema fails the
        call naming its field, before anything is scored."""
        if not rule.name.strip():
            raise SpecError("name", "is required: the name the rule is reported under")
        which = rule.WhichOneof("rule")
        try:
            if which == "regex":
                spec = RegexSpec(rule.name, rule.regex.pattern)
                regex_scorer(spec)
                return spec
            if which == "json":
                schema = rule.json.schema if rule.json.HasField("schema") else None
                if schema is not None and len(schema) > limits.max_field_chars:
                    raise SpecError("json.schema", f"{len(schema)} characters exceed the limit of "
                                                   f"{limits.max_field_chars} (--max-field-chars)")
                spec = JsonSpec(rule.name, schema)
                json_scorer(spec)
                return spec
        except RuleError as error:
            raise SpecError({"regex": "regex.pattern", "schema": "json.schema"}.get(error.field, error.field),
                            error.message) from None
        raise SpecError("rule", "set regex or json")
