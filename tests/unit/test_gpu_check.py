"""benchmarks/gpu_check.py without a GPU: its command line, its comparison with the stored float32
reference (which passes bfloat16-sized noise and fails a judge reading the wrong completion), the
8B-shaped judge it writes, its table, and that it stops before starting anything without a GPU."""

from __future__ import annotations

import json
import pathlib
import random
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import common  # noqa: E402  (benchmark scripts: their folder on the path first)
import gpu_check  # noqa: E402


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(gpu_check.REFERENCE.read_text())


def test_the_command_line():
    args = gpu_check.parse_args([])
    assert (args.judges, args.articles, args.rewards_only, args.write_reference) == (["embedded", "8b"], 64, False,
                                                                                      False)
    assert gpu_check.parse_args(["--judges", "8b", "--articles", "91"]).judges == ["8b"]
    for wrong in (["--judges", "70b"], ["--judges", ""], ["--articles", "92"], ["--articles", "0"]):
        with pytest.raises(SystemExit):
            gpu_check.parse_args(wrong)


def test_the_stored_reference_is_float32_on_a_cpu_for_64_items(reference):
    assert len(reference["keys"]) == len(set(reference["keys"])) == len(reference["rewards"]) == 64
    assert all(0 <= reward <= 1 for reward in reference["rewards"])
    assert reference["settings"]["dtype"] == "float32" and reference["machine"]["cpu"]
    assert reference["rubric"] == "summeval-coherence"


def test_bfloat16_sized_differences_pass(reference):
    keys, expected = reference["keys"], reference["rewards"]
    assert gpu_check.compare(reference, keys, expected).passed
    noise = random.Random(0)
    rewards = [r + noise.uniform(-0.012, 0.012) for r in expected]  # mean |difference| about 0.006, as on CPU
    agreement = gpu_check.compare(reference, keys[::-1], rewards[::-1])  # the order of items does not matter
    assert agreement.passed and agreement.mean < 0.008 and agreement.spearman > 0.95
    assert "within tolerance" in agreement.line()


def test_a_judge_reading_the_wrong_completion_fails(reference):
    keys, expected = reference["keys"], reference["rewards"]
    shuffled = []
    for start in range(0, 64, 8):  # each article's summaries, the rewards rotated among them
        group = expected[start:start + 8]
        shuffled += group[1:] + group[:1]
    agreement = gpu_check.compare(reference, keys, shuffled)
    assert not agreement.passed and "OUT OF tolerance" in agreement.line()
    shifted = gpu_check.compare(reference, keys, [r + 0.015 for r in expected])  # a systematic shift
    assert not shifted.passed and shifted.spearman == pytest.approx(1.0)


def test_other_items_are_an_error_never_a_pass(reference):
    with pytest.raises(ValueError, match="other items"):
        gpu_check.compare(reference, reference["keys"][:63] + ["another/item"], reference["rewards"])


def test_spearman_ranks_ties_together():
    assert gpu_check.ranks([0.3, 0.1, 0.3, 0.2]) == [3.5, 1.0, 3.5, 2.0]
    assert gpu_check.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert gpu_check.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)


EMBEDDED_CONFIG = {  # the embedded judge's config.json as transformers 5 writes it (abridged)
    "_model_name_or_path": "Smollm2 135M", "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "bos_token_id": 1, "eos_token_id": 2, "dtype": "float32", "hidden_size": 576, "head_dim": 64,
    "intermediate_size": 1536, "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3,
    "max_position_embeddings": 8192, "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"},
    "tie_word_embeddings": True, "vocab_size": 49152,
}


def parameters(config: dict) -> tuple[int, int]:
    """(all parameters, the layers') of a Llama config."""
    hidden, head, layers = config["hidden_size"], config["head_dim"], config["num_hidden_layers"]
    attention = hidden * head * (2 * config["num_attention_heads"] + 2 * config["num_key_value_heads"])
    per_layer = attention + 3 * hidden * config["intermediate_size"] + 2 * hidden
    embeddings = config["vocab_size"] * hidden * (1 if config["tie_word_embeddings"] else 2)
    return layers * per_layer + embeddings + hidden, layers * per_layer


def test_the_dummy_judge_is_llama3_8b_shaped_with_the_embedded_tokenizers_vocabulary():
    config = common.random_judge_config(EMBEDDED_CONFIG, "llama-3-8b")
    sizes = {k: v for k, v in common.RANDOM_JUDGE_SHAPES["llama-3-8b"].items() if k not in ("rope_theta", "dtype")}
    assert {k: config[k] for k in sizes} == sizes
    assert (config["architectures"], config["vocab_size"], config["bos_token_id"]) == (["LlamaForCausalLM"], 49152, 1)
    assert config["dtype"] == "bfloat16" and config["rope_parameters"]["rope_theta"] == 500000.0
    assert "_model_name_or_path" not in config
    total, layers = parameters(config)
    assert round(total / 1e9, 1) == 7.4 and round(layers / 1e9, 1) == 7.0  # Llama-3-8B's layers: 6.98B
    transformers_4 = {k: v for k, v in EMBEDDED_CONFIG.items() if k not in ("dtype", "rope_parameters")}
    legacy = common.random_judge_config({**transformers_4, "torch_dtype": "float32", "rope_theta": 1e5}, "llama-3-8b")
    assert (legacy["torch_dtype"], legacy["rope_theta"]) == ("bfloat16", 500000.0)  # transformers 4's spelling


def test_the_dummy_judge_folder_has_the_tokenizer_and_no_weights(tmp_path):
    embedded = tmp_path / "embedded"
    embedded.mkdir()
    (embedded / "config.json").write_text(json.dumps(EMBEDDED_CONFIG))
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "model.safetensors"):
        (embedded / name).write_text(name)
    folder = common.write_random_judge(tmp_path / "dummy", embedded, "llama-3-8b")
    assert sorted(p.name for p in folder.iterdir()) == ["chat_template.jinja", "config.json", "tokenizer.json",
                                                       "tokenizer_config.json"]
    assert json.loads((folder / "config.json").read_text())["num_hidden_layers"] == 32


def run(judge: str, server: str, items: int, seconds: float, peak: int | None = None) -> gpu_check.Run:
    return gpu_check.Run(judge, server, 61.4, items, seconds, peak, {})


def test_the_table_sets_each_server_against_vllm_serve_with_the_same_judge():
    rows = gpu_check.table_rows([run("embedded", "ours", 512, 2.0, 20480), run("embedded", "vllm serve", 512, 4.0),
                                 run("8b", "ours", 512, 8.0), run("8b", "vllm serve", 512, 6.0)])
    assert rows == [["embedded", "ours", 61, "20.0", 256.0, "2.00x"],
                    ["embedded", "vllm serve", 61, "-", 128.0, "1.00x"],
                    ["8b", "ours", 61, "-", 64.0, "0.75x"], ["8b", "vllm serve", 61, "-", 85.3, "1.00x"]]
    assert gpu_check.table_rows([run("embedded", "ours", 0, 0.0)]) == [["embedded", "ours", 61, "-", "-", "-"]]


def test_without_a_gpu_it_stops_before_starting_anything(monkeypatch):
    monkeypatch.setattr(gpu_check, "gpus", lambda: [])
    monkeypatch.setattr(gpu_check.common, "summeval_docs", lambda: pytest.fail("read the data set"))
    with pytest.raises(SystemExit, match="no GPU"):
        gpu_check.main([])
    with pytest.raises(SystemExit, match="8B-shaped judge needs one"):
        gpu_check.main(["--on-cpu"])
