"""Rules and the gate through a real server and the client: the served rules in GetInfo,
inline rules, a gate in Score and ScoreGroups and through a trainer adapter (the real judge
behind it), bad rules refused naming the field, and a server with no judge at all serving
rules alone."""

import pytest
from geval_client import RewardClient, RewardServerError, RuleScore
from geval_client.pb import reward_pb2
from geval_server.launcher import start_server, stop_server

ARTICLE = "A council voted to build a library beside the station; work starts in March and ends in 2026."
QUESTION = "What is 1/2 + 1/4? Put the answer in \\boxed{}."
RIGHT = ["1/2 + 1/4 = 2/4 + 1/4, so the answer is \\boxed{\\frac{3}{4}}.", "It is \\boxed{0.75}.",
         "Adding the quarters: \\boxed{3/4}"]
WRONG = ["1/2 + 1/4 = 2/6, so \\boxed{\\frac{1}{3}}.", "It is \\boxed{0.5}.", "\\boxed{2/6}"]
RUBRIC = "overall-quality"


def _items(completions, reference="3/4"):
    return [{"prompt": QUESTION, "completion": c, "reference": reference} for c in completions]


def test_getinfo_lists_the_served_rules(client):
    rules = {r.name: r for r in client.info().rubrics if r.kind == reward_pb2.SCORER_KIND_RULE}
    assert set(rules) == {"math-equal", "exact-match"}
    assert rules["math-equal"].rule.rule == "math-equal" and rules["math-equal"].uses_reference
    assert "math-verify" in rules["math-equal"].rule.description


def test_math_equal_and_exact_match_score_the_final_answer(client):
    results = client.score(_items(RIGHT + WRONG), {"math-equal": 1})
    assert [r.reward for r in results] == [1.0] * 3 + [0.0] * 3
    (score,) = results[0].scores
    assert isinstance(score, RuleScore) and score.answer == "\\frac{3}{4}" and score.passed
    exact = client.score([{"prompt": "Capital of France?", "completion": "\\boxed{Paris.}", "reference": "paris"}],
                         "exact-match")
    assert exact[0].reward == 1.0 and "paris" in exact[0].scores[0].reason.lower()


def test_a_gate_spares_the_judge_the_wrong_answers_and_leaves_the_right_ones_exact(client):
    plain = client.score(_items(RIGHT), RUBRIC)
    gated = client.score(_items(RIGHT + WRONG), RUBRIC, gate="math-equal", gate_reward=0.05)
    assert [r.gated for r in gated] == [False] * 3 + [True] * 3
    assert [r.reward for r in gated[3:]] == [0.05] * 3 and all(r.scores == [] for r in gated[3:])
    assert [r.reward for r in gated[:3]] == [r.reward for r in plain]  # float32 and the read memo: the same reads
    assert all(r.gate.passed for r in gated[:3]) and not any(r.gate.passed for r in gated[3:])


def test_inline_rules_through_the_client(client):
    rules = [{"name": "boxed", "regex": r"\\boxed\{"}, {"name": "json-answer", "json": {"type": "object"}}]
    results = client.score(_items([RIGHT[0], '{"answer": "3/4"}']), rules)
    assert [[s.reward for s in r.scores] for r in results] == [[1.0, 0.0], [0.0, 1.0]]


def test_a_bad_rule_or_gate_fails_the_call_naming_the_field(client):
    with pytest.raises(RewardServerError, match=r"rubrics\[0\]\.rule\.regex\.pattern: is not a valid pattern"):
        client.score(_items(RIGHT[:1]), [{"name": "bad", "regex": "(unclosed"}])
    with pytest.raises(RewardServerError, match="gate.name: 'overall-quality' is a geval scorer"):
        client.score(_items(RIGHT[:1]), RUBRIC, gate=RUBRIC)


def test_a_group_is_compared_among_the_members_that_pass_the_gate(client):
    group = {"prompt": QUESTION, "reference": "3/4", "completions": [RIGHT[0], WRONG[0], RIGHT[1]]}
    (result,) = client.score_groups([group], RUBRIC, gate="math-equal", gate_reward=0.0)
    assert [c.gated for c in result.completions] == [False, True, False]
    assert result.completions[1].reward == 0.0 and result.completions[1].gate.passed is False
    (alone,) = client.score_groups([{**group, "completions": [RIGHT[0], RIGHT[1]]}], RUBRIC)
    assert [c.reward for c in (result.completions[0], result.completions[2])] == pytest.approx(
        [c.reward for c in alone.completions], abs=1e-6)


def test_the_trl_reward_takes_a_gate(server_address):
    from geval_client.trainers.trl import GEvalReward

    reward = GEvalReward(server_address, RUBRIC, reference_column="answer", gate="math-equal", gate_reward=0.02)
    rewards = reward(prompts=[QUESTION] * 2, completions=[RIGHT[0], WRONG[0]], answer=["3/4", "3/4"])
    assert rewards[1] == 0.02 and 0.0 <= rewards[0] <= 1.0


def test_a_server_without_a_judge_serves_rules_alone(tmp_path):
    process, address = start_server(tmp_path / "server.log", "--no-judge", "--no-semscore",
                                    "--default-rubric", "math-equal")
    try:
        with RewardClient(address) as client:
            assert sorted(r.name for r in client.info().rubrics) == ["exact-match", "math-equal"]
            assert [r.reward for r in client.score(_items(RIGHT[:1] + WRONG[:1]))] == [1.0, 0.0]
            with pytest.raises(RewardServerError, match="unknown rubric 'overall-quality'"):
                client.score(_items(RIGHT[:1]), RUBRIC)
    finally:
        stop_server(process)
