"""The judge on every core: vLLM's CPU default (one core reserved for its scheduler)
against the server's default (none reserved, OpenMP threads on every core), side by
side in one run on the same items.

Each setting gets fresh servers, in the order old, new, new, old, so a drift in the
machine's load favours neither. On each server: one 64-item Score call (8 SummEval
articles x 8 summaries, a GRPO step) from 1 client, then 4 concurrent clients with
64 items each; the server is idle for IDLE_S seconds before and after (does anything
spin while idle?). CPU seconds are split by process: the gRPC frontend (our Python,
the tokenizer, vLLM's client side), vLLM's engine core (its scheduler) and worker
(the model). The frontend's CPU per item is what would cap a GPU engine's items/s.

    python benchmarks/bench_cores.py [--port 50407] [--one-client]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import common

IDLE_S = 10.0
SETTINGS = {
    "old: one core reserved (vLLM's default)": {"VLLM_CPU_NUM_OF_RESERVED_CPU": "1"},
    "new: none reserved (the server's default)": {},
}


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {role: after.get(role, 0.0) - before.get(role, 0.0) for role in after}


async def one_server(port: int, env: dict[str, str], sets: dict[int, list[dict]], warm: list[dict], label: str):
    """Rewards, and per client count: (wall s, CPU s by role); idle CPU s by role."""
    with common.geval_server(port, log_name=f"bench_cores-{label}", env=env) as (address, pid):
        await common.score_concurrently(address, [warm], 1)
        before = common.process_cpu_seconds(pid)
        time.sleep(IDLE_S)
        idle = cpu_delta(before, common.process_cpu_seconds(pid))
        runs, rewards = {}, []
        for clients, items in sets.items():
            before = common.process_cpu_seconds(pid)
            started = time.perf_counter()
            await common.score_concurrently(address, common.calls(items), clients)
            runs[clients] = (time.perf_counter() - started, cpu_delta(before, common.process_cpu_seconds(pid)))
        from geval_client import AsyncRewardClient

        async with AsyncRewardClient(address, timeout=1800) as client:  # a prefix-cache hit: cheap
            rewards = [r.reward for r in await client.score(sets[1], rubrics=common.RUBRIC)]
    return rewards, runs, idle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50407)
    parser.add_argument("--one-client", action="store_true", help="skip the 4-client calls (a shorter run)")
    args = parser.parse_args()
    info = common.machine()
    docs = common.summeval_docs()
    warm = [{"prompt": docs[-1].article, "completion": docs[-1].summaries[0]}]

    # Every server is fresh, so all score the same items; the 1- and 4-client sets differ,
    # so within a server no call reads another's prefix cache.
    sets = {1: common.grpo_batch(docs[:8])}
    if not args.one_client:
        sets[4] = common.grpo_batch(docs[8:40])
    measured = {name: [] for name in SETTINGS}
    for repeat, name in enumerate([*SETTINGS, *reversed(SETTINGS)]):
        print(f"{name}, run {repeat + 1} of 4", flush=True)
        measured[name].append(asyncio.run(one_server(args.port, SETTINGS[name], sets, warm, f"run{repeat}")))

    rows = []
    for name, runs in measured.items():
        for clients in sets:
            n = 64 * clients
            walls = [run[1][clients][0] for run in runs]
            cpu = {role: statistics.mean(run[1][clients][1].get(role, 0.0) for run in runs)
                   for role in ("frontend", "engine core", "worker")}
            rows.append([name, clients, n, round(n / statistics.mean(walls), 3),
                         round(sum(cpu.values()) / n, 3), round(cpu["frontend"] / n, 4),
                         round(cpu["engine core"] / n, 3), round(cpu["worker"] / n, 3)])
        idle = {role: statistics.mean(run[2].get(role, 0.0) for run in runs) for role in ("frontend", "engine core",
                                                                                       "worker")}
        rows.append([name, "idle", "-", "-", round(sum(idle.values()) / IDLE_S, 3), round(idle["frontend"] / IDLE_S, 3),
                     round(idle["engine core"] / IDLE_S, 3), round(idle["worker"] / IDLE_S, 3)])
    old, new = (measured[name] for name in SETTINGS)
    speedups = {c: statistics.mean(r[1][c][0] for r in old) / statistics.mean(r[1][c][0] for r in new)
                for c in sets}
    differences = [abs(a - b) for o in old for n in new for a, b in zip(o[0], n[0])]
    frontend_per_item = statistics.mean(r[1][1][1]["frontend"] / 64 for r in new)
    common.report(
        "bench_cores",
        "8. Every core: one core reserved for vLLM's scheduler vs none",
        ["setting", "clients", "items", "items/s", "CPU s/item (all)", "frontend CPU s/item",
         "engine core CPU s/item", "worker CPU s/item"],
        rows,
        {"rubric": common.RUBRIC, "judge": "SmolLM2-135M-Instruct (embedded)", **common.engine_settings(),
         "items": "SummEval, 8 articles x 8 summaries per 64-item call, other articles for each call"},
        notes=[
            "New over old: " + ", ".join(f"{speedups[c]:.2f}x the items/s with {c} client(s)" for c in sets)
            + " (mean of two fresh servers each, run old, new, new, old).",
            f"Rewards under both settings: max |difference| {max(differences):.1e} over the same 64 items.",
            f"idle rows: CPU cores busy (CPU s per wall s) over {IDLE_S:.0f} s with no call in flight.",
            f"The frontend (one Python process: gRPC, validation, tokenizing, prompt assembly, vLLM's client "
            f"side) spends {frontend_per_item:.4f} CPU s per item, so on its own it would run out of CPU at "
            f"about {1 / frontend_per_item:.0f} items/s: the most a faster (GPU) engine could be fed.",
        ],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
