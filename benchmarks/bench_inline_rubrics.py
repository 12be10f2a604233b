"""Rubrics sent with the request: what a batch costs with one shared rubric, a rubric
per prompt, and a distinct rubric per item (rubrics as rewards), side by side on one
server with the same items.

The rubric's text comes first in the judge's prompt, so items share a cached
prefix only as far as they share a rubric: one rubric lets a prompt's completions
share the rubric and the article, a rubric per prompt keeps that, a rubric per
item shares nothing. Each condition is scored twice: cold (the rubrics are new to
the server and prepared in the call) and warm (the same call again; the prepared
rubrics are kept, and the second pass also reads vLLM's prefix cache). Each
condition scores its own articles, so none reads another's cache.

    python benchmarks/bench_inline_rubrics.py [--port 50406] [--prompts 4] [--completions 8]
"""

from __future__ import annotations

import argparse
import asyncio

import common
from geval_server.scorers.geval.rubrics import PRESET_DIR, read_toml

CONDITIONS = ("one rubric for the batch", "a rubric per prompt", "a rubric per item")


def rubric_variant(base: dict, tag: str) -> dict:
    """The preset with a sentence of its own, as per-prompt criteria differ in their text."""
    variant = dict(base, name=f"{base['name']}-{tag}")
    variant["evaluation_criteria"] = f"{base['evaluation_criteria']} (Checklist {tag}.)"
    return variant


def batch(docs: list[common.Doc], base: dict, condition: str, completions: int) -> list[dict]:
    items = common.grpo_batch(docs, completions)
    for index, item in enumerate(items):
        if condition == CONDITIONS[1]:
            item["rubric"] = rubric_variant(base, f"prompt-{index // completions}")
        elif condition == CONDITIONS[2]:
            item["rubric"] = rubric_variant(base, f"item-{index}")
    return items


async def measure(address: str, pid: int, items: list[dict], base: dict) -> tuple[common.Timed, common.Timed]:
    from geval_client import AsyncRewardClient

    shared = None if "rubric" in items[0] else [base]
    async with AsyncRewardClient(address, timeout=3600) as client:
        timings = []
        for _ in range(2):  # cold, then warm
            async with common.timed([pid]) as t:
                results = await client.score(items, rubrics=shared)
            failed = [r.error.message for r in results if not r.ok]
            if failed:
                raise RuntimeError(f"{len(failed)} items failed, e.g. {failed[0]}")
            timings.append(t)
    return timings[0], timings[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50406)
    parser.add_argument("--prompts", type=int, default=4, help="articles per batch")
    parser.add_argument("--completions", type=int, default=8, help="summaries per article")
    args = parser.parse_args()
    info = common.machine()
    base = read_toml(PRESET_DIR / f"{common.RUBRIC}.toml")
    docs = common.summeval_docs()
    batches = {
        condition: batch(docs[k * args.prompts:(k + 1) * args.prompts], base, condition, args.completions)
        for k, condition in enumerate(CONDITIONS)
    }

    async def run() -> dict[str, tuple[common.Timed, common.Timed]]:
        with common.geval_server(args.port, "--no-semscore", log_name="bench_inline_rubrics-server") as (address, pid):
            warm = [{"prompt": docs[-1].article, "completion": docs[-1].summaries[0]}]
            await common.score_concurrently(address, [warm], 1)
            return {condition: await measure(address, pid, items, base) for condition, items in batches.items()}

    measured = asyncio.run(run())
    n = len(next(iter(batches.values())))
    base_cold, base_warm = measured[CONDITIONS[0]]
    rows = []
    for condition, (cold, warm) in measured.items():
        distinct = len({str(item.get("rubric")) for item in batches[condition]})
        rows.append([condition, n, distinct, round(n / cold.seconds, 3), round(cold.cpu_seconds / n, 3),
                     round(cold.cpu_seconds / base_cold.cpu_seconds, 2), round(n / warm.seconds, 3),
                     round(warm.cpu_seconds / n, 3)])
    common.report(
        "bench_inline_rubrics",
        "10. Rubrics sent with the request: one per batch, per prompt, per item",
        ["rubrics", "items", "distinct rubrics", "items/s (cold)", "CPU s/item (cold)",
         "CPU vs one rubric (cold)", "items/s (warm)", "CPU s/item (warm)"],
        rows,
        {"rubric": f"{common.RUBRIC} sent inline (steps included), variants differ by one sentence",
         **common.engine_settings(), "items": f"SummEval, {args.prompts} articles x {args.completions} summaries, "
                                          "other articles per condition"},
        notes=[
            "cold: the rubrics are new to the server (prepared in the call: score slot found, prompt head "
            "tokenized); warm: the same call again (prepared rubrics kept, and vLLM's prefix cache holds "
            "the first pass, so a warm call mostly measures a full cache hit).",
            "CPU: all processes of the server (gRPC frontend, engine core, worker).",
        ],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
