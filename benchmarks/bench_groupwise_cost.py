"""What a ScoreGroups call costs per schedule and group size, with and without the judge
reasoning first, and what reasoning does to its position bias.

    python benchmarks/bench_groupwise_cost.py [--sizes 2 4 8] [--reasoning-tokens 64] [--diagnostic-groups 2]

Cost: one group of distinct SummEval summaries of one article per (mode, schedule, size), each on
an article of its own so no row finds another's prefix in vLLM's cache; per row the reads,
prompt and generated tokens the group result reports, the wall seconds of the call, and
whether a dry run of the same request (nothing read) gave the same reads and prompt tokens.
Position: all pairs of groups of 4 from SummEval articles and Topical-Chat contexts (past the
cost part's), read plainly and in reasoning mode: position consistency, the share of
single-order reads preferring the first-placed response, and the mass on the verdict letters.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import common
from geval_audit import datasets
from geval_client import Logprobs, Reasoning, RewardClient

SCHEDULES = {"all pairs": {"schedule": "all_pairs"}, "neighbours k=2": {"schedule": "neighbours", "neighbours": 2},
             "anchor (reference)": {"schedule": "anchor"}, "listwise": {"schedule": "listwise"}}
RUBRICS = {"SummEval": "summeval-coherence", "Topical-Chat": "topical-chat-coherence"}
DIAGNOSTIC_SIZE = 4


def _distinct(group: list[datasets.Rated]) -> list[datasets.Rated]:
    """The group's texts, each once: a copy would be judged through its first (docs/scorers/groupwise.md)."""
    return list({r.text: r for r in reversed(group)}.values())[::-1]


def cost(client: RewardClient, articles: list[list[datasets.Rated]], sizes: list[int], modes: dict, rows: list) -> None:
    """One call per (mode, schedule, size), each on the next unused article."""
    fresh = iter(articles)
    for mode_name, mode in modes.items():
        for schedule, options in SCHEDULES.items():
            for size in sizes:
                article = _distinct(next(fresh))[:size]
                wire = [{"prompt": article[0].source, "completions": [r.text for r in article],
                         "reference": article[0].reference}]
                (planned,) = client.score_groups(wire, rubrics=RUBRICS["SummEval"], mode=mode, dry_run=True,
                                                 **options)
                started = time.perf_counter()
                (result,) = client.score_groups(wire, rubrics=RUBRICS["SummEval"], mode=mode, **options)
                seconds = time.perf_counter() - started
                failed = [c.error.message for c in result.completions if not c.ok]
                if failed or not result.ok:
                    raise RuntimeError(f"{mode_name} {schedule} {size}: {failed or result.error}")
                agrees = (planned.engine_reads, planned.prompt_tokens) == (result.engine_reads, result.prompt_tokens)
                rows.append([mode_name, schedule, size, result.engine_reads, result.prompt_tokens,
                             result.generated_tokens, f"{seconds:.2f}", f"{seconds / size:.2f}",
                             "yes" if agrees else "NO"])
                print(f"  {mode_name} {schedule} n={size}: {result.engine_reads} reads, {seconds:.1f} s", flush=True)


def position(client: RewardClient, task: str, groups: list[list[datasets.Rated]], modes: dict, rows: list,
             examples: list) -> None:
    """All pairs of each group, per mode: the judge's position diagnostics, averaged over the groups."""
    wire = [{"prompt": g[0].source, "completions": [r.text for r in _distinct(g)[:DIAGNOSTIC_SIZE]]} for g in groups]
    for mode_name, mode in modes.items():
        started = time.perf_counter()
        results = client.score_groups(wire, rubrics=RUBRICS[task], schedule="all_pairs", mode=mode)
        seconds = time.perf_counter() - started
        per = [r.rubrics[0] for r in results]
        rows.append([task, mode_name, len(groups), sum(r.engine_reads for r in results),
                     f"{statistics.fmean(p.position_consistency for p in per):.2f}",
                     f"{statistics.fmean(p.first_position_preference for p in per):.0%}",
                     f"{statistics.fmean(p.label_mass for p in per):.2f}", f"{seconds:.1f}"])
        if per[0].rationales:
            examples.append(f"{task}, a rationale the judge wrote (Response A = completion "
                            f"{per[0].rationales[0].listed[0]}): {per[0].rationales[0].text[:300]!r}")
        print(f"  {task} {mode_name} done", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--reasoning-tokens", type=int, default=64, help="reasoning mode's max_tokens")
    parser.add_argument("--diagnostic-groups", type=int, default=2, help="groups per set for the position part")
    parser.add_argument("--server", help="a running server (default: start one)")
    args = parser.parse_args()
    summeval = list(datasets.groups(datasets.summeval()).values())
    topical = list(datasets.groups(datasets.topical_chat()).values())
    modes = {"logprobs": Logprobs(), f"reasoning ({args.reasoning_tokens} tokens)": Reasoning(args.reasoning_tokens)}
    needed = len(modes) * len(SCHEDULES) * len(args.sizes)
    info = common.machine()
    settings = {"sizes": args.sizes, "reasoning_tokens": args.reasoning_tokens,
                "diagnostic_groups": args.diagnostic_groups, "judge": "embedded SmolLM2-135M-Instruct"}
    cost_rows, position_rows, examples = [], [], []
    with contextlib.ExitStack() as stack:
        if not args.server:
            stack.enter_context(common.geval_server(50710, log_name="groupwise-cost-server"))
        client = stack.enter_context(RewardClient(args.server or "127.0.0.1:50710", timeout=7200))
        cost(client, summeval[:needed], args.sizes, modes, cost_rows)
        common.report("groupwise_schedule_cost", "Groupwise judging: the cost of a group per schedule, size and mode",
                      ["mode", "schedule", "group size", "engine reads", "prompt tokens", "generated tokens",
                       "seconds", "seconds per completion", "dry run agrees"], cost_rows, settings,
                      ["one group per row, each on an article of its own (no row finds another's prefix cached); "
                       "the server's read memo is off.",
                       "reasoning: prompt tokens count each prompt up to where the judge writes; the verdict read "
                       "after its text repeats that prompt from vLLM's prefix cache."], info)
        diagnostic = args.diagnostic_groups
        position(client, "SummEval", summeval[needed:needed + diagnostic], modes, position_rows, examples)
        position(client, "Topical-Chat", topical[:diagnostic], modes, position_rows, examples)
        common.report("groupwise_reasoning_position", "Groupwise judging: position bias, plain and reasoning reads",
                      ["set", "mode", "groups", "engine reads", "position consistency", "first-placed preferred",
                       "verdict mass", "seconds"], position_rows, settings, examples, info)


if __name__ == "__main__":
    main()
