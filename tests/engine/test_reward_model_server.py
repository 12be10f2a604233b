"""The reward-model scorer served end to end: random-weight sequence classifiers of two
families (Llama-3.1 with two heads, beside the embedded judge; Qwen2.5 alone, --no-judge)
with their real tokenizers and chat templates, against transformers' forward on the same
weights. One server of each kind for the whole module: engines start slowly here."""

from __future__ import annotations

import math

import pytest
from geval_client import RewardClient, RewardModelScore
from geval_server.launcher import ServerStartError, start_server, stop_server

from tests.families.assets import classifier_dir, model_dir

pytestmark = pytest.mark.engine  # starts servers of its own

HEADS = ("helpfulness", "safety")
PROMPT = "Summarize: the cat sat on the mat all afternoon."
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPT}]
COMPLETIONS = ["A cat sat on a mat.", "The cat spent the afternoon on the mat.", "Dogs bark."]
REFERENCE = "The cat sat on the mat."
# float32, as transformers computes the same weights here; both read each token once (no batch effects)
TOLERANCE = 1e-4


def _server(tmp_path_factory, name: str, *args: str):
    log_path = tmp_path_factory.mktemp(name) / "server.log"
    return start_server(log_path, "--dtype", "float32", "--enforce-eager", "--no-semscore", *args)


@pytest.fixture(scope="module")
def beside_address(tmp_path_factory):
    """The embedded judge with a two-head Llama-3.1 reward model, its reward from `safety`."""
    process, address = _server(tmp_path_factory, "beside", "--reward-model", str(classifier_dir("llama-3.1", HEADS)),
                               "--reward-model-head", "safety", "--reward-model-center", "1.5",
                               "--reward-model-scale", "2")
    yield address
    stop_server(process)


@pytest.fixture(scope="module")
def beside(beside_address):
    with RewardClient(beside_address) as client:
        yield client


@pytest.fixture(scope="module")
def alone_address(tmp_path_factory):
    """A Qwen2.5 reward model served without a judge."""
    process, address = _server(tmp_path_factory, "alone", "--no-judge", "--reward-model",
                               str(classifier_dir("qwen2.5")))
    yield address
    stop_server(process)


@pytest.fixture(scope="module")
def alone(alone_address):
    with RewardClient(alone_address) as client:
        yield client


def transformers_logits(path, messages: list[dict]) -> list[float]:
    """The classifier's logits as transformers computes them for the chat apply_chat_template renders."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    ids = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False)
    model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        return model(torch.tensor([list(ids)])).logits[0].tolist()


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _only(result) -> RewardModelScore:
    assert result.ok, result.error
    (score,) = [s for s in result.scores if isinstance(s, RewardModelScore)]
    return score


def test_raw_scores_match_transformers_in_both_families(beside, alone):
    llama, qwen = classifier_dir("llama-3.1", HEADS), classifier_dir("qwen2.5")
    items = [{"prompt": PROMPT, "completion": COMPLETIONS[0]}, {"prompt": CHAT, "completion": COMPLETIONS[1]}]
    for client, path, heads in ((beside, llama, HEADS), (alone, qwen, ("reward",))):
        results = client.score(items, rubrics={"reward-model": 1})
        for item, result in zip(items, results):
            prompt = item["prompt"] if isinstance(item["prompt"], list) else [{"role": "user", "content": PROMPT}]
            expected = transformers_logits(path, [*prompt, {"role": "assistant", "content": item["completion"]}])
            score = _only(result)
            assert [score.heads[head] for head in heads] == pytest.approx(expected, abs=TOLERANCE)
            assert score.raw_score == score.heads[heads[-1]]  # beside: --reward-model-head safety


def test_several_heads_are_named_and_the_chosen_one_makes_the_reward(beside):
    (result,) = beside.score([{"prompt": PROMPT, "completion": COMPLETIONS[0]}], rubrics={"reward-model": 1})
    score = _only(result)
    assert sorted(score.heads) == sorted(HEADS)  # a proto map: by name, in no order
    assert score.raw_score == score.heads["safety"]
    assert score.form == "calibrated" and score.reference_raw_score is None
    assert score.reward == pytest.approx(sigmoid((score.raw_score - 1.5) / 2), abs=1e-12)
    (info,) = [r for r in beside.info().rubrics if r.name == "reward-model"]
    assert (info.reward_model.head, list(info.reward_model.heads)) == ("safety", list(HEADS))
    assert (info.reward_model.center, info.reward_model.scale, info.reward_model.dtype) == (1.5, 2.0, "float32")


def test_reference_probability_is_exact(alone):
    item = {"prompt": PROMPT, "completion": COMPLETIONS[0], "reference": REFERENCE}
    (with_reference,) = alone.score([item], rubrics={"reward-model": 1})
    reference_alone = {"prompt": PROMPT, "completion": REFERENCE}
    (plain, ref) = alone.score([{"prompt": PROMPT, "completion": COMPLETIONS[0]}, reference_alone],
                               rubrics={"reward-model": 1})
    score = _only(with_reference)
    assert score.form == "reference"
    assert score.raw_score == _only(plain).raw_score and score.reference_raw_score == _only(ref).raw_score
    assert score.reward == sigmoid(score.raw_score - score.reference_raw_score)


def test_combined_with_a_geval_rubric_in_one_call(beside):
    (result,) = beside.score([{"prompt": PROMPT, "completion": COMPLETIONS[1]}],
                             rubrics={"reward-model": 1, "summeval-coherence": 3})
    assert result.ok, result.error
    rewards = {s.rubric: s.reward for s in result.scores}
    assert set(rewards) == {"reward-model", "summeval-coherence"}
    assert result.reward == pytest.approx((rewards["reward-model"] + 3 * rewards["summeval-coherence"]) / 4)


def test_groups_are_mean_bradley_terry_probabilities(alone):
    (group,) = alone.score_groups([{"prompt": PROMPT, "completions": [*COMPLETIONS, COMPLETIONS[0]]}],
                                  rubrics={"reward-model": 1})
    raw = [_only(r).raw_score for r in alone.score([{"prompt": PROMPT, "completion": c} for c in COMPLETIONS],
                                                  rubrics={"reward-model": 1})]
    raw.append(raw[0])
    expected = [sum(sigmoid(raw[i] - raw[j]) for j in range(4) if j != i) / 3 for i in range(4)]
    assert [c.reward for c in group.completions] == pytest.approx(expected, abs=1e-12)
    assert group.engine_reads == 3  # a copy is read once


def test_groups_on_the_judges_rubric_and_the_reward_model_weigh_both(beside):
    group = {"prompt": PROMPT, "completions": COMPLETIONS}
    (both,) = beside.score_groups([group], rubrics={"reward-model": 1, "summeval-coherence": 2})
    assert [r.rubric for r in both.rubrics] == ["reward-model", "summeval-coherence"]  # as the request names them
    model, judged = both.rubrics
    assert [c.reward for c in both.completions] == pytest.approx(
        [(2 * a + b) / 3 for a, b in zip(judged.rewards, model.rewards)], abs=1e-12)


def test_an_over_long_item_fails_alone(alone):
    results = alone.score([{"prompt": PROMPT, "completion": "word " * 2000},
                           {"prompt": PROMPT, "completion": COMPLETIONS[0]}], rubrics={"reward-model": 1})
    assert results[0].error is not None and results[0].error.code == "INVALID_ARGUMENT"
    assert results[0].error.field == "items[0].completion" and "max_model_len of 512" in results[0].error.message
    assert results[1].ok


def test_no_judge_refuses_geval_rubrics(alone):
    from geval_client import RewardServerError

    with pytest.raises(RewardServerError, match="summeval-coherence"):
        alone.score([{"prompt": PROMPT, "completion": COMPLETIONS[0]}], rubrics={"summeval-coherence": 1})


def test_fit_reward_model_fits_the_median_and_quartile_spread_of_the_raw_scores(alone, alone_address, tmp_path,
                                                                                capsys):
    import json
    import statistics
    from types import SimpleNamespace

    from geval_audit.reward_model_fit import main

    completions = [f"The cat sat {'still ' * n}on the mat." for n in range(8)]
    data = tmp_path / "rollouts.jsonl"
    data.write_text("".join(json.dumps({"prompt": PROMPT, "completion": c}) + "\n" for c in completions))
    args = SimpleNamespace(input=data, server=alone_address, auth_token_file=None, format=None, split=None,
                           prompt_column="prompt", completion_column="completion", batch_size=3, timeout=60.0)
    assert main(args) == 0
    raw = [_only(r).raw_score for r in alone.score([{"prompt": PROMPT, "completion": c} for c in completions],
                                                  rubrics={"reward-model": 1})]
    q1, median, q3 = statistics.quantiles(raw, n=4, method="inclusive")
    flags = dict(flag.split("=") for flag in capsys.readouterr().out.strip().splitlines()[-1].split())
    assert float(flags["--reward-model-center"]) == pytest.approx(median, rel=1e-5)
    assert float(flags["--reward-model-scale"]) == pytest.approx((q3 - q1) / (2 * math.log(3)), rel=1e-5)


def test_a_model_that_is_not_a_classifier_is_refused_naming_the_flag(tmp_path):
    with pytest.raises(ServerStartError, match="--reward-model .*not a sequence classifier"):
        start_server(tmp_path / "server.log", "--no-judge", "--reward-model", str(model_dir("qwen2.5")))


BOTH = {"reward-model": 1, "summeval-coherence": 1}


def test_every_trainer_adapter_takes_the_reward_model_beside_a_rubric(beside, beside_address):
    """Selection is by name, so each adapter's reward is the server's weighted mean of both."""
    from geval_client.trainers.areal import make_reward_fn
    from geval_client.trainers.openrlhf import make_reward_func
    from geval_client.trainers.trl import GEvalReward
    from geval_client.trainers.verl import compute_score

    (expected,) = beside.score([{"prompt": PROMPT, "completion": COMPLETIONS[1]}], rubrics=BOTH)
    assert {s.rubric for s in expected.scores} == set(BOTH)
    got = {
        "trl": GEvalReward(beside_address, BOTH)(prompts=[PROMPT], completions=[COMPLETIONS[1]])[0],
        "verl": compute_score("summeval", COMPLETIONS[1], None, {"prompt": PROMPT}, server=beside_address,
                              rubrics=BOTH)["score"],
        "openrlhf": make_reward_func(beside_address, BOTH)([PROMPT + COMPLETIONS[1]], [PROMPT])["rewards"][0],
    }
    assert got == pytest.approx(dict.fromkeys(got, expected.reward), abs=1e-9)
    # AReaL sends the dataset's chat messages: the judge reads them as a chat.
    chat = [{"role": "user", "content": PROMPT}]
    (from_chat,) = beside.score([{"prompt": chat, "completion": COMPLETIONS[1]}], rubrics=BOTH)
    assert make_reward_fn(beside_address, BOTH)("", COMPLETIONS[1], [], [], messages=chat) == from_chat.reward


def test_a_fleet_spreads_the_reward_model_and_refuses_a_replica_serving_another(beside, beside_address, alone,
                                                                                alone_address, tmp_path_factory):
    """A second replica of the Qwen2.5 reward model: the fleet's rewards are one replica's. A
    replica whose `reward-model` is another model (its content hash differs) is refused before
    any item is scored."""
    from geval_client.fleet.replicas import MixedFleet

    process, second = _server(tmp_path_factory, "second", "--no-judge", "--reward-model",
                              str(classifier_dir("qwen2.5")))
    try:
        items = [{"prompt": PROMPT + f" Part {p}.", "completion": c} for p in range(4) for c in COMPLETIONS]
        with RewardClient([alone_address, second]) as fleet:
            spread = fleet.score(items, rubrics={"reward-model": 1})
            assert len(fleet.replica_load()) == 2 and sum(fleet.replica_load().values()) == len(items)
        single = alone.score(items, rubrics={"reward-model": 1})
        assert [r.reward for r in spread] == pytest.approx([r.reward for r in single], abs=1e-6)
    finally:
        stop_server(process)
    hashes = [{r.name: r.content_hash for r in c.info().rubrics}["reward-model"] for c in (beside, alone)]
    assert hashes[0] != hashes[1]
    with RewardClient([alone_address, beside_address]) as mixed, pytest.raises(MixedFleet):
        mixed.score(items, rubrics={"reward-model": 1})
