"""The gate and the rules through the judge and the wire, over the recording engine: an item
that fails the gate is read by nothing (the engine sees no prompt of it) and gets gate_reward;
an item that passes gets exactly what it gets without a gate; bad rules and gates are refused
naming the field."""

import asyncio

import pytest
from geval_client.pb import reward_pb2
from geval_client.requests import group_request, score_request
from geval_server.api.wire import RequestError, group_result, item_result, validate, validate_groups
from geval_server.judge.inputs import UnservableRubric
from geval_server.scorers.base import JudgeInput

from tests.unit.fakes import SpaceDigitTokenizer, fake_judge

RUBRIC = "summeval-coherence"
ARTICLE = "A council voted to build a library beside the station; work starts in March."
RIGHT, WRONG = "The answer is \\boxed{\\frac{1}{2}}.", "The answer is \\boxed{0.7}."


def _items(completions, reference="0.5"):
    return [{"prompt": ARTICLE, "completion": c, "reference": reference} for c in completions]


def _score(judge, items, rubrics=RUBRIC, **gate):
    valid = validate(score_request(items, rubrics, gate=gate.get("gate"), gate_reward=gate.get("gate_reward")),
                     judge.needs_reference, RUBRIC)
    return asyncio.run(judge.score_request(valid))


def test_an_item_that_fails_the_gate_is_never_read_and_gets_the_gate_reward():
    judge, engine, _ = fake_judge(rules=True)
    outcomes = _score(judge, _items([WRONG]), gate="math-equal", gate_reward=0.1)
    assert engine.prompts == []
    (outcome,) = outcomes
    assert outcome.gated and outcome.reward == 0.1 and outcome.scores == [] and outcome.failure is None
    assert outcome.gate.score.reward == 0.0 and "0.7" in outcome.gate.score.verdict.reason


def test_an_item_that_passes_gets_exactly_what_it_gets_without_a_gate():
    gated_judge, gated_engine, _ = fake_judge(rules=True)
    plain_judge, plain_engine, _ = fake_judge(rules=True)
    (gated,) = _score(gated_judge, _items([RIGHT]), gate="math-equal")
    (plain,) = _score(plain_judge, _items([RIGHT]))
    assert not gated.gated and gated.gate.score.reward == 1.0
    assert gated.reward == plain.reward and gated_engine.prompts == plain_engine.prompts


def test_half_wrong_answers_halve_the_judges_reads():
    judge, engine, _ = fake_judge(rules=True)
    _score(judge, _items([RIGHT + f" ({i})" for i in range(4)] + [WRONG + f" ({i})" for i in range(4)]))
    every = len(engine.prompts)
    judge, engine, _ = fake_judge(rules=True)
    outcomes = _score(judge, _items([RIGHT + f" ({i})" for i in range(4)] + [WRONG + f" ({i})" for i in range(4)]),
                      gate="math-equal")
    assert len(engine.prompts) * 2 == every
    assert [o.gated for o in outcomes] == [False] * 4 + [True] * 4


def test_an_item_without_the_reference_its_gate_needs_fails_alone_naming_the_field():
    judge, _, _ = fake_judge(rules=True)
    items = [{"prompt": ARTICLE, "completion": RIGHT}, {"prompt": ARTICLE, "completion": RIGHT, "reference": "1/2"}]
    failed, passed = _score(judge, items, gate="math-equal")
    assert failed.failure.code == "INVALID_ARGUMENT" and failed.failure.field == "items[0].reference"
    assert passed.failure is None and not passed.gated


def test_a_gate_whose_reward_is_not_pass_or_fail_is_refused_naming_the_field():
    judge, _, _ = fake_judge(rules=True)
    with pytest.raises(UnservableRubric, match="gate.name: 'summeval-coherence' is a geval scorer") as refused:
        _score(judge, _items([RIGHT]), gate=RUBRIC)
    assert refused.value.field == "gate.name"


@pytest.mark.parametrize("reward", [-0.1, 1.5, float("nan")])
def test_a_gate_reward_outside_0_1_is_refused(reward):
    judge, _, _ = fake_judge(rules=True)
    with pytest.raises(RequestError, match=r"gate_reward: must be in \[0, 1\]"):
        _score(judge, _items([RIGHT]), gate="math-equal", gate_reward=reward)


def test_a_gate_reward_without_a_gate_is_refused_by_the_client():
    with pytest.raises(ValueError, match="gate_reward is read only with a gate"):
        score_request(_items([RIGHT]), RUBRIC, gate_reward=0.2)


def test_inline_rules_score_one_or_zero_and_say_why():
    judge, engine, _ = fake_judge(rules=True)
    rules = [{"name": "has-year", "regex": r"\b(19|20)\d\d\b"}, {"name": "is-json", "json": {"type": "object",
                                                                                           "required": ["answer"]}}]
    completions = ['{"answer": 2024}', "The library opens in 2031.", '{"reply": 1}']
    outcomes = _score(judge, _items(completions), rules)
    assert engine.prompts == []  # no rule reads the engine
    rewards = [[s.score.reward for s in o.scores] for o in outcomes]
    assert rewards == [[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]]
    reasons = [s.score.verdict.reason for s in outcomes[2].scores]
    assert reasons[0] == "no match for the pattern" and "'answer' is a required property" in reasons[1]
    wire = reward_pb2.ItemResult(**item_result("0", outcomes[1]))
    assert wire.scores[1].rule.passed is False and wire.scores[1].rule.reason.startswith("not JSON")


@pytest.mark.parametrize("rule, field, message", [
    ({"name": "r", "regex": "(unclosed"}, "rubrics[0].rule.regex.pattern", "not a valid pattern"),
    ({"name": "j", "json": {"type": 12}}, "rubrics[0].rule.json.schema", "not a valid JSON Schema"),
    ({"name": "j", "json": "{not json"}, "rubrics[0].rule.json.schema", "is not JSON"),
    ({"name": "", "regex": "a"}, "rubrics[0].rule.name", "is required"),
])
def test_a_rule_that_cannot_run_fails_the_call_naming_its_field(rule, field, message):
    judge, _, _ = fake_judge(rules=True)
    with pytest.raises(RequestError, match=message) as refused:
        validate(score_request(_items([RIGHT]), [rule]), judge.needs_reference, RUBRIC)
    assert refused.value.field == field


def test_a_rule_that_runs_past_its_bound_fails_its_item_alone():
    judge, _, _ = fake_judge(rules=True)
    backtracking = {"name": "slow", "regex": "(a|aa)+$"}
    items = [{"prompt": ARTICLE, "completion": "a" * 60 + "b"}, {"prompt": ARTICLE, "completion": "aaaa"}]
    slow, quick = _score(judge, items, [backtracking])
    assert slow.failure.code == "INVALID_ARGUMENT" and slow.failure.field == "items[0].completion"
    assert "time bound" in slow.failure.message
    assert quick.failure is None and quick.reward == 1.0


def test_a_group_compares_only_the_members_that_pass_the_gate():
    judge, engine, _ = fake_judge(rules=True)
    groups = [{"prompt": ARTICLE, "reference": "0.5", "completions": [RIGHT, WRONG, RIGHT + " Indeed."]}]
    request = group_request(groups, RUBRIC, gate="math-equal", gate_reward=0.05)
    (result,) = asyncio.run(judge.score_groups(validate_groups(request, judge.needs_reference, RUBRIC)))
    assert result.gated == [False, True, False] and result.rewards[1] == 0.05
    assert all(WRONG not in prompt for prompt in _texts(engine))
    (rubric,) = result.per_rubric
    assert rubric.outcome.win_matrix[1] == [None, None, None] and rubric.outcome.win_matrix[0][2] is not None
    wire = group_result("0", result)
    assert [c.gated for c in wire.completions] == [False, True, False]
    assert wire.completions[1].gate.rule.passed is False and wire.completions[0].gate.rule.passed is True


def test_a_group_none_of_whose_members_pass_is_read_by_nothing():
    judge, engine, _ = fake_judge(rules=True)
    groups = [{"prompt": ARTICLE, "reference": "0.5", "completions": [WRONG, WRONG + " Sure."]}]
    request = group_request(groups, RUBRIC, gate="math-equal")
    (result,) = asyncio.run(judge.score_groups(validate_groups(request, judge.needs_reference, RUBRIC)))
    assert engine.prompts == [] and result.rewards == [0.0, 0.0] and result.gated == [True, True]
    assert group_result("0", result).completions[0].gated


def test_rules_in_a_group_score_each_member_alone():
    judge, _, _ = fake_judge(rules=True)
    groups = [{"prompt": ARTICLE, "reference": "1/2", "completions": [RIGHT, WRONG]}]
    request = group_request(groups, "math-equal")
    (result,) = asyncio.run(judge.score_groups(validate_groups(request, judge.needs_reference, RUBRIC)))
    assert result.rewards == [1.0, 0.0]


def test_likelihood_and_semscore_are_refused_in_groups_naming_their_kind():
    judge, _, _ = fake_judge(rules=True)
    judge.scorers["semscore"] = type("S", (), {"name": "semscore", "kind": "semscore", "comparer": None,
                                               "needs_reference": True})()
    request = group_request([{"prompt": ARTICLE, "reference": "r", "completions": ["a", "b"]}], "semscore")
    with pytest.raises(UnservableRubric, match="is a semscore scorer, which is not compared within groups"):
        asyncio.run(judge.score_groups(validate_groups(request, judge.needs_reference, RUBRIC)))


def _texts(engine):
    tokenizer = SpaceDigitTokenizer()
    return [tokenizer.decode(prompt) for prompt in engine.prompts]


def test_the_judge_input_of_a_rule_is_the_completion_as_written():
    judge, _, _ = fake_judge(rules=True)
    scorer = judge.scorers["exact-match"]
    request = scorer.request(JudgeInput(ARTICLE, "Paris.", "paris"), "items[0]")
    (score,) = asyncio.run(scorer.score([request], None))
    assert score.reward == 1.0
