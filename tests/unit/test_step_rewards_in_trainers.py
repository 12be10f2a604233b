"""Process rewards through the trainer adapters, without the engine: the steps option reaching
the Score request from each adapter (and the environment), and a process reward placed on a
response's tokens (shared/step_tokens.py) with a real byte-level tokenizer, against a scripted
gRPC server that scores steps as the process-reward scorers do. tests/frameworks/test_verl_steps.py
runs the placement through veRL's own reward-manager loading."""

from __future__ import annotations

import re

import pytest
from geval_client.pb import reward_pb2, reward_pb2_grpc
from geval_client.trainers import openrlhf, openrlhf_bridge, verl
from geval_client.trainers.shared.sample_rewards import SampleScorer
from geval_client.trainers.shared.scoring import Groupwise, Sample, SampleReward
from geval_client.trainers.shared.step_tokens import step_ends, token_rewards
from geval_client.trl import GEvalReward

from tests.unit.fakes import SpaceDigitTokenizer, serve_in_process

REDUCE = {"min": min, "max": max, "mean": lambda s: sum(s) / len(s), "last": lambda s: s[-1]}


class StepJudge(reward_pb2_grpc.RewardServiceServicer):
    """Splits each completion on the request's delimiter (blank lines by default), scores step k
    (from 0) 0.9 - 0.2 k, and reduces them as the request says (min by default); an item whose
    rubrics include any other name also gets that rubric at 0.5. An empty completion fails for
    its own reason. Records its requests."""

    def __init__(self) -> None:
        self.requests: list[reward_pb2.ScoreRequest] = []

    def Score(self, request, context):
        self.requests.append(request)
        delimiter = request.steps.delimiter if request.steps.HasField("delimiter") else None
        reduction = request.steps.reduction or "min"
        results = []
        for i, item in enumerate(request.items):
            result = reward_pb2.ItemResult(id=item.id)
            if not item.completion:
                result.error.CopyFrom(reward_pb2.ItemError(
                    code=reward_pb2.ERROR_CODE_INVALID_ARGUMENT, message=f"items[{i}].completion: must not be empty",
                    field=f"items[{i}].completion"))
                results.append(result)
                continue
            spans = _spans(item.completion, delimiter)
            scores = [round(0.9 - 0.2 * k, 6) for k in range(len(spans))]
            names = [r.name for r in (item.rubrics or request.rubrics)] or ["process-reward-model"]
            for name in names:
                if name == "process-reward-model":
                    result.scores.append(reward_pb2.RubricScore(
                        rubric=name, reward=REDUCE[reduction](scores), process_reward=reward_pb2.ProcessRewardResult(
                            step_scores=scores, step_starts=[s for s, _ in spans], step_ends=[e for _, e in spans],
                            reduction=reduction)))
                else:
                    result.scores.append(reward_pb2.RubricScore(rubric=name, reward=0.5))
            result.reward = sum(s.reward for s in result.scores) / len(result.scores)
            result.plain_reward = result.reward
            results.append(result)
        return reward_pb2.ScoreResponse(results=results)

    def ScoreGroups(self, request, context):
        """Records the request; every completion gets 0.5."""
        self.requests.append(request)
        return reward_pb2.ScoreGroupsResponse(results=[
            reward_pb2.GroupResult(id=group.id, completions=[reward_pb2.CompletionResult(reward=0.5)
                                                             for _ in group.completions])
            for group in request.groups])


def _spans(text: str, delimiter: str | None) -> list[tuple[int, int]]:
    """Each stripped, non-empty piece's [start, end), as the server splits steps."""
    pieces = re.split(r"\n[ \t]*\n", text) if delimiter is None else text.split(delimiter)
    spans, at = [], 0
    for piece in pieces:
        start = text.index(piece, at)
        at = start + len(piece)
        stripped = piece.strip()
        if stripped:
            left = start + piece.index(stripped)
            spans.append((left, left + len(stripped)))
    return spans


@pytest.fixture(scope="module")
def judge():
    yield from serve_in_process(StepJudge())


# --- the steps option reaches the request -------------------------------------------------

def _last_steps(judge) -> dict:
    steps = judge.requests[-1].steps
    return {"set": judge.requests[-1].HasField("steps"), "delimiter": steps.delimiter, "reduction": steps.reduction}


def test_verl_passes_its_steps_option_and_trains_on_the_reduced_reward(judge):
    reply = verl.compute_score("d", "One.\n##Two.\n##Three.", "R", {"prompt": "P"}, server=judge.address,
                               rubrics="process-reward-model", steps={"delimiter": "##", "reduction": "mean"})
    assert _last_steps(judge) == {"set": True, "delimiter": "##", "reduction": "mean"}
    assert reply["score"] == pytest.approx(0.7)


def test_the_steps_come_from_the_environment_key_by_key(judge, monkeypatch):
    monkeypatch.setenv("GEVAL_REWARD_STEP_REDUCTION", "last")
    monkeypatch.setenv("GEVAL_REWARD_STEP_DELIMITER", "##")
    scorer = SampleScorer.configure(judge.address, "process-reward-model", steps={"delimiter": "|"})
    assert dict(scorer.steps) == {"delimiter": "|", "reduction": "last"}
    reward = openrlhf.make_reward_func(judge.address, "process-reward-model")(["P:One.##Two."], ["P:"], ["R"])
    assert _last_steps(judge) == {"set": True, "delimiter": "##", "reduction": "last"}
    assert reward["rewards"] == pytest.approx([0.7])


def test_a_scorer_with_steps_pickles_and_hashes():
    """verifiers keeps a coalescer per Scorer; veRL and Ray ship it to other processes."""
    import pickle

    scorer = SampleScorer.configure("127.0.0.1:1", steps={"reduction": "mean", "delimiter": "##"})
    assert hash(scorer) == hash(pickle.loads(pickle.dumps(scorer)))


def test_no_steps_option_sends_none_and_the_server_defaults_hold(judge):
    assert SampleScorer.configure(judge.address).steps is None
    verl.compute_score("d", "One.\n\nTwo.", "R", {"prompt": "P"}, server=judge.address, rubrics="process-reward-model")
    assert _last_steps(judge)["set"] is False


def test_trl_passes_its_steps_option(judge):
    reward = GEvalReward(judge.address, "process-reward-model", steps={"reduction": "last"})
    assert reward(prompts=["P"], completions=["One.\n\nTwo.\n\nThree."]) == pytest.approx([0.5])
    assert _last_steps(judge) == {"set": True, "delimiter": "", "reduction": "last"}


class Configured(Exception):
    """Raised in place of serving: main stops with the reward it configured."""


def _stop(reward, *args):
    raise Configured(reward)


def test_the_bridge_takes_steps_on_its_command_line(monkeypatch):
    monkeypatch.setattr(openrlhf_bridge, "serve", _stop)
    with pytest.raises(Configured) as configured:
        openrlhf_bridge.main(["--server", "127.0.0.1:1", "--step-delimiter", "##", "--step-reduction", "product"])
    assert dict(configured.value.args[0].scorer.steps) == {"delimiter": "##", "reduction": "product"}


def test_a_misspelt_steps_key_fails_when_configured():
    with pytest.raises(ValueError, match=r"steps: unknown keys \['reducton'\]"):
        SampleScorer.configure("127.0.0.1:1", steps={"reducton": "min"})
    with pytest.raises(ValueError, match=r"steps: unknown keys"):
        GEvalReward("127.0.0.1:1", steps={"delim": "##"})


def test_groupwise_sends_its_steps_with_score_groups(judge):
    scorer = SampleScorer.configure(judge.address, "process-reward-model", steps={"reduction": "mean"})
    rewards = scorer.groupwise_rewards([Sample("P", "A."), Sample("P", "B.")], [[0, 1]], Groupwise())
    assert _last_steps(judge) == {"set": True, "delimiter": "", "reduction": "mean"}
    assert [r.reward for r in rewards] == [0.5, 0.5]


# --- step scores placed on tokens ---------------------------------------------------------

TEXT = "Tom has 3 apples.\n\nHe buys 4 at the café\n\nThe answer is 3 + 4 = 7."


def _prefix(tokenizer, ids):
    return lambda k: tokenizer.decode(ids[:k])


def test_each_step_ends_on_the_token_that_completes_it():
    tokenizer = SpaceDigitTokenizer()
    ids = tokenizer.encode(TEXT)
    spans = _spans(TEXT, None)
    ends = step_ends(TEXT, spans, _prefix(tokenizer, ids), len(ids))
    for (_, end), token in zip(spans, ends):
        assert tokenizer.decode(ids[: token + 1]).startswith(TEXT[:end])
        assert not tokenizer.decode(ids[:token]).startswith(TEXT[:end])
    # the second step ends in "é", two byte-level tokens: it ends on the second, which completes it
    assert len(tokenizer.encode("é")) == 2 and tokenizer.decode(ids[: ends[1] + 1]).endswith("café")
    assert ends[1] == len(tokenizer.encode(TEXT[: spans[1][1]])) - 1
    assert ends[-1] == len(ids) - 1


def test_step_scores_go_on_their_tokens_and_other_rewards_on_the_last():
    tokenizer = SpaceDigitTokenizer()
    ids = tokenizer.encode(TEXT)
    spans = tuple(_spans(TEXT, None))
    stepped = SampleReward(0.5, False, 0.0, 0, {"process-reward-model": 0.5}, step_scores=(0.9, 0.7, 0.5),
                           step_spans=spans)
    placed = token_rewards(stepped, TEXT, _prefix(tokenizer, ids), len(ids))
    assert list(placed.values()) == [0.9, 0.7, 0.5]
    assert list(placed) == step_ends(TEXT, spans, _prefix(tokenizer, ids), len(ids))
    failed = SampleReward(0.0, True, 0.0, 0)
    assert token_rewards(failed, TEXT, _prefix(tokenizer, ids), len(ids)) == {len(ids) - 1: 0.0}
    outcome = SampleReward(0.8, False, 0.0, 0, {"overall-quality": 0.8})
    assert token_rewards(outcome, TEXT, _prefix(tokenizer, ids), len(ids)) == {len(ids) - 1: 0.8}
    mixed = SampleReward(0.6, False, 0.0, 0, {"process-reward-model": 0.7, "overall-quality": 0.5},
                         step_scores=(0.7,), step_spans=((0, len(TEXT)),))
    with pytest.raises(ValueError, match="process reward as the only rubric"):
        token_rewards(mixed, TEXT, _prefix(tokenizer, ids), len(ids))


def test_the_scorer_keeps_the_item_s_steps(judge):
    scorer = SampleScorer.configure(judge.address, "process-reward-model")
    (reward,) = scorer.rewards([Sample("P", TEXT)])
    assert reward.step_scores == (0.9, 0.7, 0.5) and reward.step_spans == tuple(_spans(TEXT, None))
