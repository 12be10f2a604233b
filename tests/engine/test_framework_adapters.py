"""The OpenRLHF and veRL adapters against the real server, set up by the README's
snippets (read from README.md) and called the way each framework calls them.

- Contract tests (always run): the calls are made as OpenRLHF 0.8-0.11 and veRL 0.8
  make them, written down from their source (OpenRLHF: openrlhf/utils/agent.py,
  SingleTurnAgentExecutor, one sample per call, `query` decoded with special tokens
  kept; veRL: the naive, remote and batch reward managers' keyword arguments).
- Framework tests (run where `openrlhf` or `verl` imports; skipped otherwise): their
  own calling code, OpenRLHF's SingleTurnAgentExecutor.execute and veRL's
  get_custom_reward_fn, BatchRewardManager and the reward loop's NaiveRewardManager.
  Only the policy's sampling is scripted."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import inspect
import json
import pathlib
import shlex
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from geval_client.errors import ItemNotScored

from tests.engine.readme_snippets import snippet, with_server
from tests.unit.test_framework_adapters import prime_scores, rate_limited

POLICY = pathlib.Path("~/.cache/geval-reward/models/smollm2-135m-instruct").expanduser()
ARTICLE = "The city council voted on Tuesday to build a new public library on the site of the old bus depot."
SUMMARY = "The council voted to build a library where the old bus depot stands."
REFERENCE = "A library will be built on the old bus depot site."

# The README's snippets: files a framework loads, and the bridge's command line.
OPENRLHF_FILE = snippet("python", "geval_client.openrlhf")
OPENRLHF_BRIDGE = snippet("bash", "-m geval_client.openrlhf_bridge")
VERL_OVERRIDES = snippet("bash", "pkg://geval_client.verl")
OPENRLHF_ENV_FILE = "from geval_client.openrlhf import reward_func  # noqa: F401\n"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(POLICY))


def openrlhf_prompt(tokenizer) -> str:
    """OpenRLHF's prompt: the dataset's input with the chat template applied."""
    messages = [{"role": "user", "content": f"Summarize in one sentence: {ARTICLE}"}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def openrlhf_query(tokenizer, prompt: str, response: str) -> str:
    """As SingleTurnAgentExecutor builds it: prompt ids + response ids, decoded with special tokens kept."""
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    ids += tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return tokenizer.decode(ids, skip_special_tokens=False)


# What the veRL forms return beside the reward (diagnostics.sample_logs and the score).
VERL_EXTRA_KEYS = {"score", "label_mass", "failed", "score_claims_removed", "bound_lowered", "bound_gap"}


def load_file(path: pathlib.Path):
    """How OpenRLHF loads a --remote_rm_url Python file (and veRL its custom reward file)."""
    spec = importlib.util.spec_from_file_location("reward_func", str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_like_openrlhf(path: pathlib.Path):
    return load_file(path).reward_func


@pytest.fixture(scope="module")
def bridge(server_address):
    """The HTTP bridge, as the README's line starts it (on a free port); yields its URL."""
    command = shlex.split(with_server(OPENRLHF_BRIDGE, server_address))
    assert command[:3] == ["python", "-m", "geval_client.openrlhf_bridge"] and command[-2:] == ["--port", "5000"]
    process = subprocess.Popen(
        [sys.executable, *command[1:-1], "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    line = process.stdout.readline()
    assert "serving OpenRLHF's reward protocol on " in line, line
    yield line.split(" on ")[1].split()[0]
    process.terminate()
    process.wait(timeout=30)


def post(url: str, payload: dict) -> tuple[int, dict]:
    """OpenRLHF's request: aiohttp POST of the JSON payload."""
    import aiohttp

    async def send():
        async with aiohttp.ClientSession() as session, session.post(url, json=payload) as response:
            return response.status, await response.json()

    return asyncio.run(send())


# --- OpenRLHF, contract ------------------------------------------------------------------


def test_the_readmes_openrlhf_file_scores_one_sample_per_call(server_address, tokenizer, tmp_path):
    path = tmp_path / "openrlhf_reward.py"
    path.write_text(with_server(OPENRLHF_FILE, server_address))
    reward_func = load_like_openrlhf(path)
    prompt = openrlhf_prompt(tokenizer)
    reply = reward_func([openrlhf_query(tokenizer, prompt, SUMMARY)], [prompt], [REFERENCE])
    assert 0.0 < reply["rewards"][0] < 1.0 and reply["extra_logs"]["geval_failed"] == [0.0]


def test_openrlhf_reward_file_scores_one_sample_per_call(server_address, tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("GEVAL_REWARD_SERVER", server_address)
    monkeypatch.setenv("GEVAL_REWARD_RUBRICS", "summeval-coherence,reference-match")
    path = tmp_path / "openrlhf_reward.py"
    path.write_text(OPENRLHF_ENV_FILE)
    reward_func = load_like_openrlhf(path)
    prompt = openrlhf_prompt(tokenizer)
    query = openrlhf_query(tokenizer, prompt, SUMMARY)
    reply = asyncio.run(asyncio.to_thread(reward_func, [query], [prompt], [REFERENCE]))  # as the executor calls it
    assert len(reply["rewards"]) == 1 and 0.0 < reply["rewards"][0] < 1.0
    assert reply["scores"] == reply["rewards"]
    assert 0.0 < reply["extra_logs"]["geval_label_mass"][0] <= 1.0
    assert reply["extra_logs"]["geval_failed"] == [0.0]
    empty = reward_func([openrlhf_query(tokenizer, prompt, "")], [prompt], [REFERENCE])
    assert empty["rewards"] == [0.0] and empty["extra_logs"]["geval_failed"] == [1.0]  # on_error "min"


def test_the_readmes_openrlhf_file_as_openrlhf_0_8_ships_it(server_address, tokenizer, tmp_path, caplog):
    """OpenRLHF 0.8.x-0.9.0 (openrlhf/utils/remote_rm_utils.py, RemoteRewardModel): the file's
    reward_func goes through ray.remote (a function, shipped with cloudpickle) and is called on
    chunks of micro_rollout_batch_size samples."""
    import cloudpickle

    path = tmp_path / "openrlhf_reward.py"
    path.write_text(with_server(OPENRLHF_FILE, server_address))
    reward_func = load_like_openrlhf(path)
    assert inspect.isfunction(reward_func)  # what ray.remote requires of a non-class
    remote = cloudpickle.loads(cloudpickle.dumps(reward_func))
    prompt = openrlhf_prompt(tokenizer)
    queries = [openrlhf_query(tokenizer, prompt, text) for text in (SUMMARY, "Library.", "")]
    chunks = [remote(queries[i:i + 2], [prompt] * len(queries[i:i + 2]), [REFERENCE] * len(queries[i:i + 2]))
              for i in range(0, 3, 2)]
    rewards = [r for chunk in chunks for r in chunk["rewards"]]
    assert 0.0 < rewards[0] < 1.0 and 0.0 < rewards[1] < 1.0 and rewards[2] == 0.0
    # A failure the completion did not cause: raised (the Ray task fails), the cause at ERROR.
    label = json.dumps({"rubrics": ["reference-match"]})
    with pytest.raises(ItemNotScored, match="reference"):
        remote(queries[:1], [prompt], [label])
    assert any(r.levelname == "ERROR" and "reference" in r.getMessage() for r in caplog.records)


def test_openrlhf_http_bridge_answers_openrlhfs_json(bridge, tokenizer):
    prompt = openrlhf_prompt(tokenizer)
    queries = [openrlhf_query(tokenizer, prompt, text) for text in (SUMMARY, "Library.", "")]
    status, reply = post(bridge, {"query": queries, "prompts": [prompt] * 3, "labels": [REFERENCE] * 3})
    assert status == 200
    assert [0.0 < r < 1.0 for r in reply["rewards"]] == [True, True, False] and reply["rewards"][2] == 0.0
    assert "extra_logs" not in reply  # the README's line serves every version; --extra-logs adds them (0.9.0 on)
    # A label object sets what the judge reads; a rubric that needs a reference and has none is
    # not the completion's fault: an error, never a made-up reward.
    label = json.dumps({"prompt": ARTICLE, "rubrics": ["reference-match"]})
    status, reply = post(bridge, {"query": queries[:1], "prompts": [prompt], "labels": [label]})
    assert status == 422 and "reference" in reply["error"]
    status, reply = post(bridge, {"query": queries[:1]})
    assert status == 400 and "prompts" in reply["error"]


# --- veRL, contract ----------------------------------------------------------------------


def verl_config(overrides: str) -> dict:
    """The README's Hydra overrides as a config: key=value lines, `+` dropped, lists as lists."""
    config: dict = {}
    for word in shlex.split(overrides.replace("\\\n", " ")):
        if "=" not in word or word.startswith("..."):
            continue
        key, value = word.lstrip("+").split("=", 1)
        *path, last = key.split(".")
        node = config
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value[1:-1].split(",") if value.startswith("[") else value
    return config


def verl_reward(overrides: str, name: str | None = None):
    """As veRL 0.8 loads it (verl/trainer/ppo/reward.py get_custom_reward_fn, and
    verl/utils/import_utils.py load_extern_object for a pkg:// path): the object, reward_kwargs bound."""
    import functools
    import importlib

    reward = verl_config(overrides)["reward"]["custom_reward_function"]
    assert reward["path"].startswith("pkg://")
    raw = getattr(importlib.import_module(reward["path"][len("pkg://"):]), name or reward["name"])
    return functools.partial(raw, **reward.get("reward_kwargs", {})), verl_config(overrides)


def test_the_readmes_verl_overrides_with_rate_limited(server_address):
    compute_score, config = verl_reward(with_server(VERL_OVERRIDES, server_address))
    assert config["reward"]["reward_manager"]["name"] == "rate_limited"
    extra_info = {"prompt": [{"role": "user", "content": ARTICLE}], "index": 0}
    sample = dict(data_source="summeval", ground_truth=REFERENCE, extra_info=extra_info)
    scores, extra = rate_limited(compute_score, [{**sample, "solution_str": SUMMARY}, {**sample, "solution_str": ""}])
    assert 0.0 < scores[0] < 1.0 and scores[1] == 0.0
    assert set(extra) == VERL_EXTRA_KEYS and extra["failed"] == [0.0, 1.0]
    # A rubric that needs a reference, and no reference: the judge's cause stops the step.
    with pytest.raises(BaseException, match=r"compute_score_rate_limited: ItemNotScored: .*reference") as raised:
        rate_limited(functools.partial(compute_score, rubrics="reference-match"),
                     [{**sample, "solution_str": SUMMARY, "ground_truth": None}])
    assert not isinstance(raised.value, Exception)


def test_verl_forms_as_its_reward_managers_call_them(server_address):
    overrides = with_server(VERL_OVERRIDES, server_address)
    options = {"rubrics": "summeval-coherence"}
    compute_score, _ = verl_reward(overrides, "compute_score")
    extra_info = {"prompt": [{"role": "user", "content": ARTICLE}], "index": 0, "num_turns": None}
    # naive and remote managers: keywords, plus the router's when a reward model runs
    sync = compute_score(data_source="summeval", solution_str=SUMMARY, ground_truth=REFERENCE, extra_info=extra_info,
                         reward_router_address=None, reward_model_tokenizer=None, **options)
    assert set(sync) == VERL_EXTRA_KEYS and 0.0 < sync["score"] < 1.0
    compute_score_async, _ = verl_reward(overrides, "compute_score_async")
    coroutine = asyncio.run(compute_score_async(data_source="summeval", solution_str=SUMMARY,
                                                ground_truth=REFERENCE, extra_info=extra_info, **options))
    assert coroutine["score"] == pytest.approx(sync["score"], abs=1e-3)
    # prime manager: positional, a float each
    prime, _ = verl_reward(overrides, "compute_score_prime")
    prime = functools.partial(prime, **options)
    assert prime_scores(prime, [("summeval", SUMMARY, REFERENCE, extra_info), ("summeval", "", REFERENCE, extra_info)]
                        ) == [pytest.approx(sync["score"], abs=1e-3), 0.0]
    with pytest.raises(BaseException, match=r"compute_score_prime: ItemNotScored: .*reference"):
        prime_scores(functools.partial(prime, rubrics="reference-match"), [("summeval", SUMMARY, None, extra_info)])
    # batch manager
    compute_score_batch, _ = verl_reward(overrides, "compute_score_batch")
    batch = compute_score_batch(data_sources=["summeval"] * 2, solution_strs=[SUMMARY, ""],
                                ground_truths=[REFERENCE, REFERENCE], extra_infos=[extra_info] * 2, **options)
    assert batch[0]["score"] == pytest.approx(sync["score"], abs=1e-3)
    assert batch[1] == {"score": 0.0, "label_mass": 0.0, "failed": 1.0, "score_claims_removed": 0.0,
                        "bound_lowered": 0.0, "bound_gap": 0.0}


# --- the frameworks' own calling code ------------------------------------------------------


class ScriptedPolicy:
    """Stands in for OpenRLHF's vLLM engine: the response is fixed, token ids and all."""

    def __init__(self, tokenizer, text: str) -> None:
        self.ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        self.text = text

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        output = SimpleNamespace(token_ids=self.ids, text=self.text, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[output])


def test_openrlhf_single_turn_executor_with_the_file_and_the_bridge(
    server_address, bridge, tokenizer, tmp_path
):
    agent = pytest.importorskip("openrlhf.utils.agent")
    path = tmp_path / "openrlhf_reward.py"
    path.write_text(with_server(OPENRLHF_FILE, server_address))
    prompt, sampling = openrlhf_prompt(tokenizer), SimpleNamespace(max_tokens=64, logprobs=None)
    rewards = []
    for remote_rm_url in (str(path), bridge):
        executor = agent.SingleTurnAgentExecutor(remote_rm_url)
        policy = ScriptedPolicy(tokenizer, SUMMARY)
        output = asyncio.run(executor.execute(prompt, REFERENCE, sampling, 2048, tokenizer, policy))
        assert output["extra_logs"]["geval_failed"] == [0.0], output
        rewards.append(output["reward"][0])
    assert 0.0 < rewards[0] < 1.0 and rewards[1] == pytest.approx(rewards[0], abs=1e-3)


def verl_data(tokenizer, summaries, ground_truth, extra_info):
    """A veRL DataProto as the rollout hands it to a reward manager."""
    import torch
    from verl import DataProto

    prompt = tokenizer(f"Summarize: {ARTICLE}", add_special_tokens=False)["input_ids"]
    responses = [tokenizer(s, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for s in summaries]
    width = max(map(len, responses))
    pad = tokenizer.pad_token_id
    n = len(summaries)
    return DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([prompt] * n),
            "responses": torch.tensor([r + [pad] * (width - len(r)) for r in responses]),
            "attention_mask": torch.tensor([[1] * (len(prompt) + len(r)) + [0] * (width - len(r)) for r in responses]),
        },
        non_tensors={
            "data_source": np.array(["summeval"] * n, dtype=object),
            "reward_model": np.array([{"ground_truth": ground_truth} for _ in range(n)], dtype=object),
            "extra_info": np.array([dict(extra_info) for _ in range(n)], dtype=object),
        },
    )


def test_verl_reward_managers_load_and_call_the_adapter(server_address, tokenizer):
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager.batch import BatchRewardManager

    def loaded(name):
        kwargs = {"server": server_address, "rubrics": "summeval-coherence"}
        path = "pkg://geval_client.verl"
        config = {"reward": {"custom_reward_function": {"path": path, "name": name, "reward_kwargs": kwargs}}}
        return get_custom_reward_fn(OmegaConf.create(config))

    extra_info = {"prompt": [{"role": "user", "content": ARTICLE}], "index": 0}
    data = verl_data(tokenizer, [SUMMARY, "Library."], REFERENCE, extra_info)
    batch = BatchRewardManager(tokenizer, num_examine=0, compute_score=loaded("compute_score_batch"))(
        data, return_dict=True)
    scores = batch["reward_tensor"].sum(dim=-1).tolist()  # each score sits on its response's last token
    assert all(0.0 < s < 1.0 for s in scores) and batch["reward_extra_info"]["failed"] == [0.0, 0.0]

    for name in ("compute_score", "compute_score_async"):
        manager = NaiveRewardManager(None, tokenizer, compute_score=loaded(name))
        result = manager.loop.run_until_complete(manager.run_single(data[0:1]))
        assert result["reward_score"] == pytest.approx(scores[0], abs=1e-3)
        assert set(result["reward_extra_info"]) == VERL_EXTRA_KEYS
