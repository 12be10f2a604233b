"""The cost of chained label reads: the same items scored with a 1-5 rubric and with
the same rubric on a 1-10 scale, side by side on one server.

SmolLM2 writes `10` as `1` then `0` after the score slot, so a 1-10 rubric takes two
engine requests per item: the slot, and the slot followed by `1` (for P(`0` | `1`)
and whether the number ends at `1`). The second is the same prompt plus one token:
vLLM's prefix cache holds the prompt's full KV blocks, so it recomputes only the last,
partly filled block. Each repetition gives both rubrics a sentence of its own, so
every pass starts from a cold cache (the rubric comes first in the prompt); the
conditions alternate (ABBA) against drift on a shared machine. Each cold call is
repeated at once (warm: every prompt, chained ones included, a full cache hit).

    python benchmarks/bench_chaining.py [--port 50407] [--prompts 8] [--completions 8] [--repeats 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

import common
from geval_server.scorers.geval.rubrics import PRESET_DIR, read_toml

SCALES = {"1-5": 5, "1-10": 10}


def rubric(base: dict, top: int, repeat: int) -> dict:
    """The preset on a 1-`top` scale (its text says so); `repeat` gives it a sentence of its own
    (a cold prefix)."""
    criteria = base["evaluation_criteria"].replace("(1-5)", f"(1-{top})")
    steps = base["evaluation_steps"].replace("1 to 5", f"1 to {top}")
    steps = steps.replace("5 is the highest", f"{top} is the highest")
    return dict(base, name=f"{base['name']}-1-{top}-r{repeat}", scale={"min": 1, "max": top},
                evaluation_criteria=f"{criteria} (Run {repeat}.)", evaluation_steps=steps)


def engine_reads(spec: dict) -> int:
    """Engine requests per item at the score slot, as the server plans them for the embedded judge."""
    from geval_server.engine.tokenization import Tokenization
    from geval_server.scorers.geval.rubrics import rubric_from_dict
    from geval_server.scorers.geval.scorer import prepare_rubric
    from geval_server.scorers.geval.slot import LabelVocabulary
    from transformers import AutoTokenizer

    tokenization = Tokenization(AutoTokenizer.from_pretrained(common.embedded_model_path()))
    prepared = prepare_rubric(tokenization, LabelVocabulary(tokenization), rubric_from_dict(spec, "benchmark"),
                              "benchmark", "benchmark")
    return len(prepared.slot.plan.reads)


async def score(client, items: list[dict], spec: dict, pid: int) -> tuple[common.Timed, list]:
    async with common.timed([pid]) as t:
        results = await client.score(items, rubrics=[spec])
    failed = [r.error.message for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} items failed, e.g. {failed[0]}")
    return t, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50407)
    parser.add_argument("--prompts", type=int, default=8, help="articles per batch")
    parser.add_argument("--completions", type=int, default=8, help="summaries per article")
    parser.add_argument("--repeats", type=int, default=2, help="cold passes per scale (alternating order)")
    args = parser.parse_args()
    info = common.machine()
    base = read_toml(PRESET_DIR / f"{common.RUBRIC}.toml")
    docs = common.summeval_docs()
    items = common.grpo_batch(docs[:args.prompts], args.completions)
    reads = {scale: engine_reads(rubric(base, top, 0)) for scale, top in SCALES.items()}

    async def run() -> dict[str, list[tuple[common.Timed, common.Timed, list]]]:
        from geval_client import AsyncRewardClient

        measured: dict[str, list] = {scale: [] for scale in SCALES}
        with common.geval_server(args.port, "--no-semscore", log_name="bench_chaining-server") as (address, pid):
            async with AsyncRewardClient(address, timeout=3600) as client:
                await score(client, items[:1], rubric(base, 5, -1), pid)  # warm-up: engine and code paths
                for repeat in range(args.repeats):
                    order = list(SCALES) if repeat % 2 == 0 else list(reversed(SCALES))
                    for scale in order:
                        spec = rubric(base, SCALES[scale], repeat)
                        cold, results = await score(client, items, spec, pid)
                        warm, _ = await score(client, items, spec, pid)
                        measured[scale].append((cold, warm, results))
        return measured

    measured = asyncio.run(run())
    n = len(items)
    cpu_cold = {scale: statistics.median(cold.cpu_seconds for cold, _, _ in runs) / n
                for scale, runs in measured.items()}
    rows = []
    for scale, runs in measured.items():
        scores = [r.scores[0] for _, _, results in runs for r in results]
        rows.append([
            scale, reads[scale], n, len(runs),
            round(statistics.median(n / cold.seconds for cold, _, _ in runs), 3), round(cpu_cold[scale], 3),
            round(cpu_cold[scale] / cpu_cold["1-5"], 3),
            round(statistics.median(n / warm.seconds for _, warm, _ in runs), 3),
            round(statistics.median(warm.cpu_seconds for _, warm, _ in runs) / n, 3),
            round(statistics.fmean(s.label_mass for s in scores), 3),
            round(statistics.fmean(s.expected_score for s in scores), 3),
            round(statistics.fmean(s.distribution[str(SCALES[scale])]
                                   for s in scores), 4),
        ])
    common.report(
        "bench_chaining",
        "9. Chained labels: the same items with a 1-5 and a 1-10 rubric",
        ["scale", "engine requests/item", "items", "cold passes", "items/s (cold)", "CPU s/item (cold)",
         "CPU vs 1-5 (cold)", "items/s (warm)", "CPU s/item (warm)", "mean label mass", "mean E[s]",
         "mean p(top label)"],
        rows,
        {"rubric": f"{common.RUBRIC} sent inline, its text naming the scale, one sentence of its own per pass",
         **common.engine_settings(),
         "items": f"SummEval, {args.prompts} articles x {args.completions} distinct summaries, one Score call"},
        notes=[
            "SmolLM2 writes `10` as `1`,`0` after the slot (which ends with the space), so the 1-10 rubric "
            "reads the slot and the slot plus `1`: P(10) = P(1) P(0 | 1), and the label 1 counts "
            "P(1) P(no digit follows | 1).",
            "cold: new rubric text, so no prompt is cached; warm: the same call again (full prefix-cache hits). "
            "Medians over the passes; the order of the scales alternates per pass.",
            "CPU: all processes of the server (gRPC frontend, engine core, worker); the machine was shared with "
            "other work, so compare the ratios, not the absolute figures.",
        ],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
