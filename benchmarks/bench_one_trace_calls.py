"""What one Score call per trace costs the server, against one batched call.

verifiers scores each rollout on its own, many at once: a judge plugin sends one item per
call. Side by side on one server (read memo off), each arm scoring fresh SummEval items
(new articles, so no arm finds another's prompts cached), on each judge in turn: the
embedded one; `tiny`, a one-layer judge with random weights (common.random_judge), whose
engine computes almost nothing, so that what is left is the stack's own cost, vLLM's included;
and `null`, the server's frontend before the null engine, which answers at once
(bench_frontend.py): what each call costs the server where the engine is not the bottleneck,
as on a GPU:

- one call: the N items in one Score call;
- one-trace calls: N one-item Score calls, all in flight at once on one channel;
- coalesced: the same N one-item calls through the client's Coalescer (what the verifiers
  judge sends), gathered within its window into Score calls of up to max_items.

    python benchmarks/bench_one_trace_calls.py [--port 50414] [--items 64] [--rounds 2] [--judges embedded tiny null]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

import bench_frontend
import common
from geval_client import AsyncRewardClient
from geval_client.trainers.shared.coalescer import Coalescer

WINDOW_S, MAX_ITEMS = 0.01, 64  # the verifiers judge's defaults (batch_window_s, max_batch)


async def one_call(client: AsyncRewardClient, items: list[dict]) -> int:
    await checked(client.score(items, rubrics=common.RUBRIC))
    return 1


async def one_trace_calls(client: AsyncRewardClient, items: list[dict]) -> int:
    await asyncio.gather(*(checked(client.score([item], rubrics=common.RUBRIC)) for item in items))
    return len(items)


async def coalesced(client: AsyncRewardClient, items: list[dict]) -> int:
    sent = []

    async def send(batch: list[dict]) -> list:
        sent.append(len(batch))
        return await client.score(batch, rubrics=common.RUBRIC)

    coalescer = Coalescer(send, WINDOW_S, MAX_ITEMS)
    await checked(asyncio.gather(*(coalescer(item) for item in items)))
    return len(sent)


async def checked(results) -> None:
    failed = [r.error.message for r in await results if not r.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} items failed, e.g. {failed[0]}")


JUDGES = ["embedded", "tiny", "null"]
ARMS = {"one call": one_call, "one-trace calls": one_trace_calls, "coalesced": coalesced}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50414)
    parser.add_argument("--items", type=int, default=64, help="items per arm and round (8 per article)")
    parser.add_argument("--rounds", type=int, default=2, help="each arm runs once per round, in turn")
    parser.add_argument("--judges", nargs="+", default=JUDGES, choices=JUDGES)
    args = parser.parse_args()
    articles = args.items // 8
    if args.items % 8 or (len(ARMS) * args.rounds * articles + 1) > 100:
        parser.error("--items: a multiple of 8, and at most 99 SummEval articles in all")
    info = common.machine()
    docs = common.summeval_docs()
    warm = [{"prompt": docs[-1].article, "completion": docs[-1].summaries[0]}]
    runs = [(arm, common.grpo_batch(docs[k * articles:(k + 1) * articles]))
            for k, arm in enumerate(arm for _ in range(args.rounds) for arm in ARMS)]

    @contextlib.contextmanager
    def serving(judge: str):
        """(address, pid, token) of a fresh server with that judge."""
        log_name = f"bench_one_trace_calls-{judge}"
        if judge == "null":
            log_path = common.RESULTS_DIR / "logs" / f"{log_name}.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with bench_frontend.null_server(common.ROOT, log_path) as (port, pid):
                yield f"127.0.0.1:{port}", pid, bench_frontend.TOKEN
            return
        flags = () if judge == "embedded" else (
            "--model", str(common.random_judge(judge)), "--load-format", "dummy", "--enforce-eager", "--no-semscore")
        with common.geval_server(args.port, *flags, log_name=log_name) as (address, pid):
            yield address, pid, None

    async def run(judge: str) -> dict[str, list[tuple[float, float, int]]]:
        measured: dict[str, list[tuple[float, float, int]]] = {arm: [] for arm in ARMS}
        with serving(judge) as (address, pid, token):
            async with AsyncRewardClient(address, timeout=1800, token=token) as client:
                await one_call(client, warm)
                for arm, items in runs:
                    async with common.timed([pid]) as t:
                        calls = await ARMS[arm](client, items)
                    measured[arm].append((t.seconds, t.cpu_seconds, calls))
        return measured

    rows = []
    for judge in args.judges:
        measured = asyncio.run(run(judge))
        base = sum(s for s, _, _ in measured["one call"])
        for arm, runs_of_arm in measured.items():
            seconds, cpu = sum(s for s, _, _ in runs_of_arm), sum(c for _, c, _ in runs_of_arm)
            items = args.items * len(runs_of_arm)
            rows.append([judge, arm, sum(n for _, _, n in runs_of_arm), items, round(items / seconds, 1),
                         round(1000 * cpu / items, 1), f"{seconds / base:.2f}x"])
    common.report(
        "bench_one_trace_calls",
        "verifiers: one Score call per trace against one batched call",
        ["judge", "arm", "Score calls", "items", "items/s", "server CPU ms per item", "wall time vs one call"],
        rows,
        {"rubric": common.RUBRIC, "judges": "SmolLM2-135M-Instruct (embedded); tiny: 1 layer, random weights; "
                                            "null: the null engine",
         "items_per_arm": args.items,
         "rounds": args.rounds, "coalescer_window_s": WINDOW_S, "coalescer_max_items": MAX_ITEMS,
         **common.engine_settings()},  # the embedded judge's; tiny adds --load-format dummy --enforce-eager
        notes=["All N calls of an arm start at once (rollouts that finish together); each arm scores new "
               "articles, 8 summaries each; arms alternate within each round.",
               "The machine is shared with other jobs: compare the rows of one run, not runs."],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
