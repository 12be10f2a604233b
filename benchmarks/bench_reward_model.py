"""Items/s of the reward-model scorer, beside the G-Eval read and beside `vllm serve --runner pooling`.

Three fresh servers, one at a time, score the same GRPO-shaped SummEval items (articles x 8
distinct summaries, every chat new to the server):
- ours, `serve --no-judge --reward-model CKPT`: one Score call of every item, rubric `reward-model`;
- ours, the embedded judge's G-Eval read of `summeval-coherence` on the same items (what a
  rubric costs beside a classifier of the same body);
- `vllm serve --runner pooling` on CKPT, as a user would drive it: one `/classify` chat request
  per item ([user: article, assistant: summary]), all in flight, raw logits.
Each is timed after one warm-up item of another article; CPU seconds are the server's whole
process tree. Ours and vllm serve's raw scores are compared item by item.

    .venv/bin/python benchmarks/bench_reward_model.py [--checkpoint DIR] [--articles 8]

The checkpoint defaults to the trained head of reward_model_head.py (run that first).
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import common  # noqa: E402
from reward_model_head import checkpoint_dir  # noqa: E402

REWARD_MODEL = "reward-model"


async def classify(http, root: str, model: str, item: dict) -> float:
    """The raw logit of one /classify chat request."""
    reply = await http.post(f"{root}/classify", json={
        "model": model, "use_activation": False, "add_generation_prompt": False,
        "messages": [{"role": "user", "content": item["prompt"]},
                     {"role": "assistant", "content": item["completion"]}]})
    reply.raise_for_status()
    return reply.json()["data"][0]["probs"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=str(checkpoint_dir()), help="a *ForSequenceClassification folder")
    parser.add_argument("--articles", type=int, default=8, help="SummEval articles, 8 summaries each")
    parser.add_argument("--dtype", default="bfloat16", help="every engine's number format (one for all three)")
    parser.add_argument("--port", type=int, default=50561)
    args = parser.parse_args()
    docs = common.summeval_docs()
    items = common.grpo_batch(docs[: args.articles])
    warm = common.grpo_batch(docs[-1:], completions=1)
    flags = ["--dtype", args.dtype]

    alone = asyncio.run(common.score_fresh(
        args.port, [*flags, "--no-judge", "--reward-model", args.checkpoint], REWARD_MODEL, items, warm, "rm-alone"))
    read = asyncio.run(common.score_fresh(args.port, flags, common.RUBRIC, items, warm, "geval-read"))
    settings = {**common.engine_arguments(), "runner": "pooling", "dtype": args.dtype}
    vs_start, vs, vs_raw = asyncio.run(common.vllm_pooling_requests(
        args.port, args.checkpoint, settings, items, warm, classify, "vllm-serve-classify"))
    rm_start, rm, ge_start, ge = alone.start_seconds, alone.timed, read.start_seconds, read.timed

    ours_raw = [r.scores[0].raw_score for r in alone.results]
    gap = max(abs(a - b) for a, b in zip(ours_raw, vs_raw))
    n = len(items)

    def row(name: str, start: float, t: common.Timed) -> list:
        return [name, round(n / t.seconds, 1), round(1000 * t.cpu_seconds / n, 1), round(start, 1)]

    rows = [row(f"ours, `{REWARD_MODEL}` alone (`--no-judge`)", rm_start, rm),
            row(f"ours, G-Eval `{common.RUBRIC}`, embedded judge", ge_start, ge),
            row("`vllm serve --runner pooling`, `/classify` per item", vs_start, vs)]
    common.report(
        "bench_reward_model", "16. The reward-model scorer beside the G-Eval read and `vllm serve`'s classify",
        ["server", "items/s", "server CPU ms/item", "start s"], rows,
        {"checkpoint": pathlib.Path(args.checkpoint).name, "items": n, "dtype": args.dtype},
        notes=[f"reward model against G-Eval read: {ge.seconds / rm.seconds:.2f}x the items/s; against vllm serve: "
               f"{vs.seconds / rm.seconds:.2f}x",
               f"raw scores, ours against vllm serve's classify: largest difference {gap:.2e} over {n} items"])


if __name__ == "__main__":
    main()
