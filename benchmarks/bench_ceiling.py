"""Benchmark 1: the engine's ceiling against our gRPC server, on one engine.

This process starts the judge once and serves it over gRPC with the server's
own `start_judge` and `build_server`, as `geval-reward serve` does.
The runs alternate on that one engine, so they see the same machine load:

- ceiling: the judge's score-slot requests (prompt ids built beforehand)
  submitted straight to the engine driver (`JudgeEngine.token_logprobs`), all in
  flight at once: no gRPC, validation or judge;
- server: the same items as 64-item Score calls (8 SummEval articles x 8
  summaries, a GRPO step) from 1 client, then from 4 concurrent clients.

Before every run the prefix cache is emptied and the rubric prefix warmed, so
ceiling and server do the same prefill work. Each pair runs ceiling-server, then
server-ceiling, so a drift in load does not favour either side.

    python benchmarks/bench_ceiling.py [--port 50401]
"""

from __future__ import annotations

import argparse
import asyncio
import os

import common

CLIENTS = (1, 4)


async def run(port: int, sets: dict[int, list[dict]], warm: dict) -> dict[tuple[str, int], tuple[common.Timed, float]]:
    from geval_server.config import ServeConfig
    from geval_server.defences.chain import DefenceSettings
    from geval_server.engine.embedded_model import EMBEDDED_MODEL
    from geval_server.scorers.base import JudgeInput
    from geval_server.server import build_server, start_judge

    # The same reads on both paths: no read memo (ceiling and server read the same prompts in
    # turn, and a kept read costs no engine work) and no masked second read (the ceiling reads
    # each prompt once; with the bound on, the server read 79% of these items twice: 0.60x).
    config = ServeConfig(model=EMBEDDED_MODEL, port=port, read_memo_size=0,
                         defences=DefenceSettings(masked_read_bound=False))
    judge = await start_judge(config)
    engine = judge.engine
    prepared = judge.scorers[common.RUBRIC].prepared
    labels = prepared.slot.all_label_token_ids
    server, _, _ = build_server(judge, config)
    await server.start()
    address = f"{config.host}:{port}"
    measured = {}

    async def fresh_cache() -> None:
        await engine.reset_prefix_cache()
        await common.score_concurrently(address, [[warm]], 1)

    async def ceiling(clients: int) -> None:
        prompts = [prepared.builder.build(JudgeInput(i["prompt"], i["completion"])).ids for i in sets[clients]]
        await fresh_cache()
        async with common.timed([os.getpid()]) as t:
            await asyncio.gather(*(engine.token_logprobs(ids, labels) for ids in prompts))
        measured["ceiling", clients] = (t, 0.0)
        print(f"ceiling, {clients} client set: {len(prompts)} items in {t.seconds:.1f} s "
              f"({t.cpu_seconds:.1f} CPU s)", flush=True)

    async def through_server(clients: int) -> None:
        await fresh_cache()
        client_cpu = common.own_cpu_seconds()
        async with common.timed([os.getpid()]) as t:
            await common.score_concurrently(address, common.calls(sets[clients]), clients)
        measured["server", clients] = (t, common.own_cpu_seconds() - client_cpu)
        print(f"server, {clients} clients: {len(sets[clients])} items in {t.seconds:.1f} s "
              f"({t.cpu_seconds:.1f} CPU s)", flush=True)

    try:
        for order, clients in enumerate(CLIENTS):
            pair = (ceiling, through_server) if order % 2 == 0 else (through_server, ceiling)
            for step in pair:
                await step(clients)
    finally:
        await server.stop(grace=None)
        judge.engine.shutdown()
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50401)
    args = parser.parse_args()
    info = common.machine()
    docs = iter(common.summeval_docs())
    prompts_per_call = common.ITEMS_PER_CALL // 8
    sets = {n: common.grpo_batch([next(docs) for _ in range(n * prompts_per_call)]) for n in CLIENTS}
    warm_doc = next(docs)
    warm = {"prompt": warm_doc.article, "completion": warm_doc.summaries[0]}

    measured = asyncio.run(run(args.port, sets, warm))

    rows = []
    for clients in CLIENTS:
        n = len(sets[clients])
        (c, _), (s, client_cpu) = measured["ceiling", clients], measured["server", clients]
        rows.append([
            clients, n, f"{n // common.ITEMS_PER_CALL} x {common.ITEMS_PER_CALL}",
            round(n / c.seconds, 3), round(n / s.seconds, 3), round(c.seconds / s.seconds, 3),
            round(c.cpu_seconds / n, 3), round(s.cpu_seconds / n, 3), round(client_cpu / n, 4),
            round(c.cpu_seconds / s.cpu_seconds, 3),
        ])
    common.report(
        "bench_ceiling",
        "1. Engine ceiling vs the gRPC server",
        ["concurrent clients", "items", "calls", "ceiling items/s", "server items/s",
         "server/ceiling items/s", "ceiling CPU s/item", "server CPU s/item", "of which client",
         "server/ceiling (CPU)"],
        rows,
        {"rubric": common.RUBRIC, "judge": "SmolLM2-135M-Instruct (embedded)", **common.engine_settings(),
         "items": "SummEval, 8 articles x 8 distinct summaries per call"},
        notes=[
            "CPU s/item: this process (gRPC server and clients, or the ceiling's submitter) with the "
            "engine's processes; server/ceiling (CPU) = ceiling CPU / server CPU, so above 1 means the "
            "server path spent less. It is robust to other load on the machine; wall-clock items/s is not.",
            "of which client: CPU s/item the clients spent (client library, protobuf) inside the server's figure.",
        ],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
