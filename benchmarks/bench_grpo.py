"""Benchmark 3: the GRPO shape, prefix caching on versus off, duplicates.

One Score call of 8 prompts x 8 completions: the 8 longest SummEval articles,
each with 8 distinct summaries. Measured through `geval-reward serve` with
prefix caching on, then restarted with --no-enable-prefix-caching, on the same items.
A second batch has duplicate completions in each group (4 distinct summaries,
each twice): the server scores identical items once, so it costs about as much
as its 32 distinct items.

Prefix-cache hits come in whole KV blocks, so the part of a group's shared
prefix past its last full block is computed again for every completion.
--block-sizes 32,128 adds a caching-on run per KV block size (vLLM's CPU
default is 128 tokens) to see what that costs.

    python benchmarks/bench_grpo.py [--port 50403] [--block-sizes 32,128]
"""

from __future__ import annotations

import argparse
import asyncio

import common

PROMPTS, COMPLETIONS = 8, 8
DISTINCT, TWICE, ONCE = "8x8 distinct", "8x8, each completion twice", "its 32 distinct items once"


def batches(docs: list[common.Doc]) -> tuple[list[dict], list[dict], list[dict]]:
    """(warm-up, distinct 8x8 batch, 8x8 batch with each completion twice)."""
    longest = sorted(docs, key=lambda d: len(d.article), reverse=True)
    distinct = common.grpo_batch(longest[:PROMPTS], COMPLETIONS)
    halves = common.grpo_batch(longest[PROMPTS : 2 * PROMPTS], COMPLETIONS // 2)
    duplicated = [item for i in range(0, len(halves), COMPLETIONS // 2)
                  for item in halves[i : i + COMPLETIONS // 2] * 2]
    warm = [{"prompt": longest[-1].article, "completion": longest[-1].summaries[0]}]
    return warm, distinct, duplicated


async def measure(
    port: int, caching: bool, named: dict[str, list[dict]], warm: list[dict], block_size: int | None = None
) -> dict[str, common.Timed]:
    args = [] if caching else ["--no-enable-prefix-caching"]
    label = f"caching {'on' if caching else 'off'}"
    if block_size is not None:
        args += ["--block-size", str(block_size)]
        label += f", block {block_size}"
    measured = {}
    log_name = f"bench_grpo-{label.replace(', ', '-').replace(' ', '-')}"
    with common.geval_server(port, *args, log_name=log_name) as (address, pid):
        await common.score_concurrently(address, [warm], 1)
        for name, items in named.items():
            async with common.timed([pid]) as t:
                await common.score_concurrently(address, [items], 1)
            measured[name] = t
            print(f"{label}, {name}: {t.seconds:.1f} s ({t.cpu_seconds:.1f} CPU s)", flush=True)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50403)
    parser.add_argument("--block-sizes", type=lambda s: [int(b) for b in s.split(",")], default=[],
                        help="also run caching on with these KV block sizes (tokens), e.g. 32,128")
    args = parser.parse_args()
    info = common.machine()
    warm, distinct, duplicated = batches(common.summeval_docs())
    named = {DISTINCT: distinct, TWICE: duplicated}
    prompts = common.JudgePrompts()
    tokens = {name: sum(len(prompts.ids(item)) for item in items) for name, items in named.items()}

    once = list({(i["prompt"], i["completion"]): i for i in named[TWICE]}.values())
    on = asyncio.run(measure(args.port, True, named, warm))
    off = asyncio.run(measure(args.port, False, {**named, ONCE: once}, warm))
    by_block = {b: asyncio.run(measure(args.port, True, {DISTINCT: distinct}, warm, b)) for b in args.block_sizes}

    rows = []
    for name, items in named.items():
        unique = len({(i["prompt"], i["completion"]) for i in items})
        n = len(items)
        rows.append([name, n, unique, tokens[name] // n, round(n / on[name].seconds, 3),
                     round(n / off[name].seconds, 3), round(off[name].seconds / on[name].seconds, 2),
                     round(off[name].cpu_seconds / on[name].cpu_seconds, 2)])
    for block, runs in by_block.items():
        t = runs[DISTINCT]
        rows.append([f"{DISTINCT}, KV block {block} tokens", len(distinct), len(distinct),
                     tokens[DISTINCT] // len(distinct),
                     round(len(distinct) / t.seconds, 3), round(len(distinct) / off[DISTINCT].seconds, 3),
                     round(off[DISTINCT].seconds / t.seconds, 2), round(off[DISTINCT].cpu_seconds / t.cpu_seconds, 2)])
    common.report(
        "bench_grpo",
        "3. GRPO shape: prefix caching on vs off, duplicate completions",
        ["batch", "items", "distinct items", "prompt tokens/item", "items/s caching on",
         "items/s caching off", "on/off speed-up (wall)", "on/off speed-up (CPU)"],
        rows,
        {"rubric": common.RUBRIC, "judge": "SmolLM2-135M-Instruct (embedded)", **common.engine_settings(),
         "articles": "the 16 longest SummEval articles (8 per batch)"},
        notes=[
            "Each batch is one Score call on a server whose rubric prefix is warm; caching off is a "
            "restart with --no-enable-prefix-caching scoring the same items.",
            f"Duplicates, caching off: the 64-item batch with each completion twice took "
            f"{off[TWICE].seconds:.1f} s ({off[TWICE].cpu_seconds:.1f} CPU s), its {len(once)} distinct items "
            f"sent once {off[ONCE].seconds:.1f} s ({off[ONCE].cpu_seconds:.1f} CPU s): identical items are "
            "scored once.",
        ],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
