"""Process rewards served end to end: random-weight process reward models in the layout vLLM
serves (Qwen2ForProcessRewardModel) with two families' real tokenizers and chat templates
(Qwen2.5 with Qwen2.5-Math-PRM's `<extra_0>` tag, alone under --no-judge; Llama-3.1 with a
reserved control token as its tag, beside the embedded judge), against transformers' forward
on the same weights; and the judge's step rubric against the same rubric read step by step.
One server of each kind for the whole module: engines start slowly here."""

from __future__ import annotations

import dataclasses
import math

import pytest
from geval_client import ProcessRewardScore, RewardClient, RewardServerError
from geval_server.launcher import ServerStartError, start_server, stop_server

from tests.families.assets import PRM_TAGS, classifier_dir, process_reward_dir

pytestmark = pytest.mark.engine  # starts servers of its own

PROMPT = "Tom has 3 apples and buys 4 more. How many apples does he have?"
CHAT = [{"role": "system", "content": "Reason step by step."}, {"role": "user", "content": PROMPT}]
STEPS = ["Tom starts with 3 apples.", "He buys 4 more, so 3 + 4 = 7.", "The answer is 7."]
COMPLETION = "\n\n".join(STEPS)
# float32 in both; a step's score is a probability computed from the same logits
TOLERANCE = 2e-3
PRM = {"process-reward-model": 1}
# For the judge: no numbers, digits or words, so the bounded read masks nothing and each step is
# read once as written, in the whole completion or alone (defences/chain.py: a text with numbers
# is read masked, its earlier steps masked in the later steps' input too).
JUDGED = ["Tom starts with some apples.", "He buys more apples at the shop.", "So he has more apples than before."]


def _server(tmp_path_factory, name: str, *args: str):
    log_path = tmp_path_factory.mktemp(name) / "server.log"
    return start_server(log_path, "--dtype", "float32", "--enforce-eager", "--no-semscore", *args)


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """A Qwen2.5 PRM served without a judge (reduction: min, the default), beside a reward
    model: two engines of their own, the memory split once between them."""
    process, address = _server(tmp_path_factory, "alone", "--no-judge", "--process-reward-model",
                               str(process_reward_dir("qwen2.5")), "--reward-model", str(classifier_dir("qwen2.5")))
    with RewardClient(address) as client:
        yield client
    stop_server(process)


@pytest.fixture(scope="module")
def beside(tmp_path_factory):
    """The embedded judge with a Llama-3.1 PRM whose steps reduce by their mean."""
    process, address = _server(tmp_path_factory, "beside", "--process-reward-model",
                               str(process_reward_dir("llama-3.1")), "--step-tag", PRM_TAGS["llama-3.1"],
                               "--step-reduction", "mean")
    with RewardClient(address) as client:
        yield client
    stop_server(process)


def transformers_step_scores(path, messages: list[dict], steps: list[str], tag: str) -> list[float]:
    """P(good) at each tag as transformers computes the Qwen2 body and Qwen2.5-Math-PRM's head
    (Linear, ReLU, Linear; softmax, index 1) for the chat apply_chat_template renders."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, Qwen2Model

    tokenizer = AutoTokenizer.from_pretrained(path)
    chat = [*messages, {"role": "assistant", "content": "".join(step + tag for step in steps)}]
    ids = list(tokenizer.apply_chat_template(chat, tokenize=True, return_dict=False))
    body = Qwen2Model.from_pretrained(path, dtype=torch.float32)
    hidden = body.config.hidden_size
    head = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 2))
    weights = load_file(str(path / "model.safetensors"))
    head.load_state_dict({key.removeprefix("score."): value for key, value in weights.items()
                          if key.startswith("score.")})
    tag_id = tokenizer.convert_tokens_to_ids(tag)
    with torch.no_grad():
        logits = head(body(torch.tensor([ids])).last_hidden_state[0])
        at_tags = logits[[i for i, token in enumerate(ids) if token == tag_id]]
        return torch.softmax(at_tags.double(), dim=-1)[:, 1].tolist()


def _only(result, rubric: str = "process-reward-model") -> ProcessRewardScore:
    assert result.ok, result.error
    (score,) = [s for s in result.scores if s.rubric == rubric]
    assert isinstance(score, ProcessRewardScore)
    return score


def test_step_scores_match_transformers_in_both_families(alone, beside):
    items = [{"prompt": PROMPT, "completion": COMPLETION}, {"prompt": CHAT, "completion": COMPLETION}]
    for client, family in ((alone, "qwen2.5"), (beside, "llama-3.1")):
        path = process_reward_dir(family)
        for item, result in zip(items, client.score(items, rubrics=PRM)):
            messages = item["prompt"] if isinstance(item["prompt"], list) else [{"role": "user", "content": PROMPT}]
            expected = transformers_step_scores(path, messages, STEPS, PRM_TAGS[family])
            assert _only(result).step_scores == pytest.approx(expected, abs=TOLERANCE)


def test_each_reduction_is_exact(alone, beside):
    item = {"prompt": PROMPT, "completion": COMPLETION}
    reduce = {"min": min, "mean": lambda s: math.fsum(s) / len(s), "last": lambda s: s[-1], "product": math.prod}
    for client, default in ((alone, "min"), (beside, "mean")):
        (plain,) = client.score([item], rubrics=PRM)
        assert _only(plain).reduction == default and _only(plain).reward == reduce[default](_only(plain).step_scores)
        for name, function in reduce.items():
            (result,) = client.score([item], rubrics=PRM, steps={"reduction": name})
            score = _only(result)
            assert score.reduction == name and score.step_scores == _only(plain).step_scores
            assert score.reward == function(score.step_scores) == result.reward


def test_steps_are_split_on_blank_lines_a_delimiter_or_given(alone):
    spaced = "  Tom starts with 3 apples.\n \n\nHe buys 4 more, so 3 + 4 = 7.\n\n\t\nThe answer is 7.\n"
    lined = "Tom starts with 3 apples. ## He buys 4 more, so 3 + 4 = 7. ## The answer is 7."
    by_lines, = alone.score([{"prompt": PROMPT, "completion": spaced}], rubrics=PRM)
    by_delimiter, = alone.score([{"prompt": PROMPT, "completion": lined}], rubrics=PRM, steps={"delimiter": "##"})
    given, = alone.score([{"prompt": PROMPT, "steps": STEPS}], rubrics=PRM)
    located, = alone.score([{"prompt": PROMPT, "completion": lined, "steps": STEPS}], rubrics=PRM)
    for completion, result in ((spaced, by_lines), (lined, by_delimiter), (COMPLETION, given), (lined, located)):
        score = _only(result)
        assert [completion[start:end] for start, end in score.step_spans] == STEPS
        assert score.step_scores == _only(given).step_scores  # the same chat, however the steps came


def test_bad_steps_fail_their_item_or_the_call_naming_the_field(alone):
    results = alone.score([{"prompt": PROMPT, "completion": "word " * 600}, {"prompt": PROMPT, "completion": "\n\n"},
                           {"prompt": PROMPT, "completion": "Tom has 7.", "steps": ["Tom has 8."]},
                           {"prompt": PROMPT, "completion": COMPLETION}], rubrics=PRM)
    long, empty, missing, fine = results
    assert long.error.field == "items[0].completion" and "max_model_len of 512" in long.error.message
    assert empty.error.field == "items[1].completion"
    assert missing.error.field == "items[2].steps[0]"
    assert fine.ok
    with pytest.raises(RewardServerError, match="steps.reduction"):
        alone.score([{"prompt": PROMPT, "completion": COMPLETION}], rubrics=PRM, steps={"reduction": "median"})


def test_get_info_reports_the_model_tag_and_reduction(alone, beside):
    for client, family, reduction in ((alone, "qwen2.5", "min"), (beside, "llama-3.1", "mean")):
        (info,) = [r for r in client.info().rubrics if r.name == "process-reward-model"]
        details = info.process_reward
        assert (details.model, details.step_tag, details.reduction, details.source, details.dtype) == (
            str(process_reward_dir(family)), PRM_TAGS[family], reduction, "process-reward-model", "float32")


def test_combined_with_a_geval_rubric_in_one_call(beside):
    (result,) = beside.score([{"prompt": PROMPT, "completion": COMPLETION}],
                             rubrics={"process-reward-model": 1, "overall-quality": 3})
    rewards = {s.rubric: s.reward for s in result.scores}
    assert result.reward == pytest.approx((rewards["process-reward-model"] + 3 * rewards["overall-quality"]) / 4)


def test_a_reward_model_and_a_prm_served_together_score_in_one_call(alone):
    (both,) = alone.score([{"prompt": PROMPT, "completion": COMPLETION}], rubrics={**PRM, "reward-model": 1})
    (prm,) = alone.score([{"prompt": PROMPT, "completion": COMPLETION}], rubrics=PRM)
    (rm,) = alone.score([{"prompt": PROMPT, "completion": COMPLETION}], rubrics={"reward-model": 1})
    assert both.reward == pytest.approx((prm.reward + rm.reward) / 2)
    assert {s.rubric for s in both.scores} == {"process-reward-model", "reward-model"}


def test_groups_score_each_member_alone_with_the_requests_steps(alone):
    completions = [COMPLETION, "Tom has 3 apples.\n\nSo he has 12."]
    (group,) = alone.score_groups([{"prompt": PROMPT, "completions": completions}], rubrics=PRM)
    singly = alone.score([{"prompt": PROMPT, "completion": c} for c in completions], rubrics=PRM)
    assert [c.reward for c in group.completions] == [r.reward for r in singly]
    steps = {"reduction": "mean"}
    (group,) = alone.score_groups([{"prompt": PROMPT, "completions": completions}], rubrics=PRM, steps=steps)
    singly = alone.score([{"prompt": PROMPT, "completion": c} for c in completions], rubrics=PRM, steps=steps)
    assert [c.reward for c in group.completions] == [r.reward for r in singly]
    assert [_only(r).reduction for r in singly] == ["mean", "mean"]


def test_the_judges_step_rubric_reads_each_step_after_the_ones_before(beside):
    """step-correctness's step k is the same rubric, sent inline, read for the problem and the
    steps before k as its input and step k as its text."""
    from geval_server.scorers.judge_steps.rubric import STEP_CORRECTNESS, step_contexts

    completion = "\n\n".join(JUDGED)
    (result,) = beside.score([{"prompt": PROMPT, "completion": completion}], rubrics={"step-correctness": 1})
    score = _only(result, "step-correctness")
    assert len(score.step_scores) == 3 and score.reduction == "min" and score.reward == min(score.step_scores)
    assert [completion[a:b] for a, b in score.step_spans] == JUDGED
    rubric = {**dataclasses.asdict(STEP_CORRECTNESS), "name": "step-by-step", "scale": {"min": 1, "max": 5}}
    del rubric["steps_generated"]
    singly = beside.score([{"prompt": context, "completion": step} for context, step in
                           zip(step_contexts(PROMPT, JUDGED), JUDGED)], rubrics=[rubric])
    assert list(score.step_scores) == pytest.approx([r.reward for r in singly], abs=1e-9)
    (info,) = [r for r in beside.info().rubrics if r.name == "step-correctness"]
    assert info.process_reward.source == "judge" and info.process_reward.reduction == "min"


def test_a_model_that_is_not_a_prm_or_a_tag_of_several_tokens_is_refused_naming_the_flag(tmp_path):
    with pytest.raises(ServerStartError, match="--process-reward-model .*not a process reward model"):
        start_server(tmp_path / "a.log", "--no-judge", "--process-reward-model", str(classifier_dir("qwen2.5")))
    with pytest.raises(ServerStartError, match="--step-tag 'two words': encodes as"):
        start_server(tmp_path / "b.log", "--no-judge", "--process-reward-model", str(process_reward_dir("qwen2.5")),
                     "--step-tag", "two words")
