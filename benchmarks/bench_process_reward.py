"""Items/s of the process-reward scorer beside `vllm serve --runner pooling`, and what a step of
the judge's step rubric costs with and without prefix reuse.

A random-weight process reward model in vLLM's PRM layout (Qwen2ForProcessRewardModel) with
the body of the embedded judge's size (SmolLM2-135M: 30 layers of 576) and the Qwen2.5
tokenizer with Qwen2.5-Math-PRM's `<extra_0>` tag, built once. Items are GRPO-shaped SummEval
items (articles x 8 distinct summaries), each summary's sentences as its steps (blank lines
between them), every chat new to the server. Fresh servers, one at a time:
- ours, `serve --no-judge --process-reward-model CKPT`: one Score call of every item;
- `vllm serve --runner pooling` on CKPT (`--pooler-config` with the tag's id), as a user would
  drive it: one `/pooling` chat request per item (task token_classify, raw logits), all in
  flight, P(good) computed from the logits at the tags as ours is;
- ours, the embedded judge's `step-correctness` on a few of the items, with vLLM's prefix cache
  (the default) and without (`--no-enable-prefix-caching`): seconds per step read.
Each is timed after one warm-up item of another article; CPU seconds are the server's whole
process tree. Ours and vllm serve's step scores are compared step by step.

    .venv/bin/python benchmarks/bench_process_reward.py [--articles 8] [--judge-articles 2]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import common  # noqa: E402

PRM = "process-reward-model"
STEP_RUBRIC = "step-correctness"
TAG = "<extra_0>"
# The embedded judge's body (SmolLM2-135M-Instruct), in Qwen2's layout.
SHAPE = {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
         "num_key_value_heads": 3, "head_dim": 64, "max_position_embeddings": 8192}
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def checkpoint_dir() -> pathlib.Path:
    """The benchmark's PRM, built once under the cache (seeded random weights)."""
    from geval_server.cache import cache_dir

    from tests.families.assets import _build_once, tokenizer_dir

    folder = cache_dir() / "benchmarks" / "process-reward-135m"
    return _build_once(folder, lambda out: _build(tokenizer_dir("qwen2.5"), out))


def _build(tokenizer_files: pathlib.Path, out: pathlib.Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoTokenizer, Qwen2Model

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_files)
    tokenizer.add_special_tokens({"additional_special_tokens": [TAG]})
    tokenizer.save_pretrained(out)
    config = AutoConfig.for_model("qwen2", vocab_size=len(tokenizer), eos_token_id=tokenizer.eos_token_id,
                                  tie_word_embeddings=False, **SHAPE)
    config.architectures = ["Qwen2ForProcessRewardModel"]
    config.save_pretrained(out)
    torch.manual_seed(0)
    body = Qwen2Model(config)
    head = torch.nn.Sequential(torch.nn.Linear(576, 576), torch.nn.ReLU(), torch.nn.Linear(576, 2))
    weights = {f"model.{k}": v.contiguous() for k, v in body.state_dict().items()}
    weights.update({f"score.{k}": v.contiguous() for k, v in head.state_dict().items()})
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})


def stepped(items: list[dict]) -> list[dict]:
    """Each summary's sentences as its steps, blank lines between them."""
    return [{**item, "completion": "\n\n".join(s for s in SENTENCE_END.split(item["completion"].strip()) if s)}
            for item in items]


def p_good(row: list[float]) -> float:
    return 1.0 / (1.0 + math.exp(row[0] - row[1]))


async def step_scores(http, root: str, model: str, item: dict) -> list[float]:
    """P(good) at each tag of one /pooling chat request (token_classify, raw logits)."""
    answer = "".join(step + TAG for step in item["completion"].split("\n\n"))
    reply = await http.post(f"{root}/pooling", json={
        "model": model, "task": "token_classify", "use_activation": False, "add_generation_prompt": False,
        "messages": [{"role": "user", "content": item["prompt"]}, {"role": "assistant", "content": answer}]})
    reply.raise_for_status()
    return [p_good(row) for row in reply.json()["data"][0]["data"]]


def pooling_settings(checkpoint: str, dtype: str) -> dict:
    """`vllm serve --runner pooling` with the STEP pooler at the tag's id."""
    import json

    from transformers import AutoTokenizer

    tag_id = AutoTokenizer.from_pretrained(checkpoint).convert_tokens_to_ids(TAG)
    return {**common.engine_arguments(), "runner": "pooling", "dtype": dtype,
            "pooler_config": json.dumps({"step_tag_id": tag_id})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--articles", type=int, default=8, help="SummEval articles, 8 summaries each (the PRM)")
    parser.add_argument("--judge-articles", type=int, default=2, help="articles the judge's step rubric reads")
    parser.add_argument("--dtype", default="bfloat16", help="every engine's number format")
    parser.add_argument("--port", type=int, default=50571)
    args = parser.parse_args()
    checkpoint = str(checkpoint_dir())
    docs = common.summeval_docs()
    items = stepped(common.grpo_batch(docs[: args.articles]))
    judged = stepped(common.grpo_batch(docs[args.articles: args.articles + args.judge_articles]))
    warm = stepped(common.grpo_batch(docs[-1:], completions=1))
    flags = ["--dtype", args.dtype]

    alone = asyncio.run(common.score_fresh(
        args.port, [*flags, "--no-judge", "--process-reward-model", checkpoint], PRM, items, warm, "prm-alone"))
    vs_start, vs, vs_scores = asyncio.run(common.vllm_pooling_requests(
        args.port, checkpoint, pooling_settings(checkpoint, args.dtype), items, warm, step_scores, "vllm-serve-prm"))
    with_cache = asyncio.run(common.score_fresh(
        args.port, [*flags, "--no-semscore"], STEP_RUBRIC, judged, warm, "judge-steps-cached"))
    without_cache = asyncio.run(common.score_fresh(
        args.port, [*flags, "--no-semscore", "--no-enable-prefix-caching"], STEP_RUBRIC, judged, warm,
        "judge-steps-uncached"))
    prm_start, prm = alone.start_seconds, alone.timed
    cached_start, cached, plain_start, plain = (with_cache.start_seconds, with_cache.timed,
                                                without_cache.start_seconds, without_cache.timed)
    cached_results = with_cache.results

    ours_scores = [r.scores[0].step_scores for r in alone.results]
    counts_agree = all(len(a) == len(b) for a, b in zip(ours_scores, vs_scores))
    gap = max(abs(x - y) for a, b in zip(ours_scores, vs_scores) for x, y in zip(a, b))
    n, steps = len(items), sum(map(len, ours_scores))
    judged_steps = sum(len(r.scores[0].step_scores) for r in cached_results)

    def row(name: str, start: float, t: common.Timed, count: int, unit_steps: int) -> list:
        return [name, round(count / t.seconds, 2), round(1000 * t.seconds / unit_steps, 1),
                round(1000 * t.cpu_seconds / unit_steps, 1), round(start, 1)]

    rows = [row(f"ours, `{PRM}` alone (`--no-judge`)", prm_start, prm, n, steps),
            row("`vllm serve --runner pooling`, `/pooling` per item", vs_start, vs, n, steps),
            row(f"ours, the judge's `{STEP_RUBRIC}`, prefix cache", cached_start, cached, len(judged), judged_steps),
            row(f"ours, the judge's `{STEP_RUBRIC}`, no prefix cache", plain_start, plain, len(judged), judged_steps)]
    common.report(
        "bench_process_reward", "Process rewards: the PRM beside `vllm serve`'s pooling, the judge's step rubric",
        ["server", "items/s", "wall ms/step", "server CPU ms/step", "start s"], rows,
        {"checkpoint": "random Qwen2ForProcessRewardModel, SmolLM2-135M's body, Qwen2.5 tokenizer",
         "prm_items": n, "prm_steps": steps, "judge_items": len(judged), "judge_steps": judged_steps,
         "dtype": args.dtype},
        notes=[f"PRM against vllm serve: {vs.seconds / prm.seconds:.2f}x the items/s",
               f"step scores, ours against vllm serve's: {'the same' if counts_agree else 'DIFFERENT'} step counts, "
               f"largest difference {gap:.2e} over {steps} steps",
               f"the judge's step rubric: prefix reuse takes a step from {1000 * plain.seconds / judged_steps:.0f} "
               f"to {1000 * cached.seconds / judged_steps:.0f} ms ({plain.seconds / cached.seconds:.2f}x)"])


if __name__ == "__main__":
    main()
