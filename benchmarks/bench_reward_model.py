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
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import common  # noqa: E402
from reward_model_head import checkpoint_dir  # noqa: E402

REWARD_MODEL = "reward-model"


async def ours(port: int, serve_args: list[str], rubric: str, items: list[dict], warm: list[dict], label: str):
    """(start seconds, Timed, results) of one Score call of every item on a fresh server."""
    from geval_client import AsyncRewardClient

    started = time.perf_counter()
    with common.geval_server(port, *serve_args, log_name=label) as (address, pid):
        start_seconds = time.perf_counter() - started
        async with AsyncRewardClient(address, timeout=3600) as client:
            await client.score(warm, rubrics=rubric)
            async with common.timed([pid]) as t:
                results = await client.score(items, rubrics=rubric)
    failed = [r.error.message for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"{label}: {len(failed)} items failed, e.g. {failed[0]}")
    return start_seconds, t, results


async def vllm_classify(port: int, checkpoint: str, dtype: str, items: list[dict], warm: list[dict]):
    """(start seconds, Timed, raw logits) of one /classify chat request per item, all in flight."""
    import httpx

    settings = {**common.engine_arguments(), "runner": "pooling", "dtype": dtype}
    started = time.perf_counter()
    with common.vllm_openai_server(port, checkpoint, settings, log_name="vllm-serve-classify") as (base_url, pid):
        start_seconds = time.perf_counter() - started
        root = base_url.removesuffix("/v1")
        async with httpx.AsyncClient(timeout=3600, limits=httpx.Limits(max_connections=len(items))) as http:
            model = (await http.get(f"{base_url}/models")).json()["data"][0]["id"]

            async def classify(item: dict) -> float:
                reply = await http.post(f"{root}/classify", json={
                    "model": model, "use_activation": False, "add_generation_prompt": False,
                    "messages": [{"role": "user", "content": item["prompt"]},
                                 {"role": "assistant", "content": item["completion"]}]})
                reply.raise_for_status()
                return reply.json()["data"][0]["probs"][0]

            await classify(warm[0])
            async with common.timed([pid]) as t:
                raw = await asyncio.gather(*(classify(item) for item in items))
    return start_seconds, t, raw


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

    rm_start, rm, rm_results = asyncio.run(ours(
        args.port, [*flags, "--no-judge", "--reward-model", args.checkpoint], REWARD_MODEL, items, warm, "rm-alone"))
    ge_start, ge, _ = asyncio.run(ours(args.port, flags, common.RUBRIC, items, warm, "geval-read"))
    vs_start, vs, vs_raw = asyncio.run(vllm_classify(args.port, args.checkpoint, args.dtype, items, warm))

    ours_raw = [r.scores[0].raw_score for r in rm_results]
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
