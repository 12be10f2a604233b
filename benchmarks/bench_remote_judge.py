"""Benchmark 17: the judge on a remote OpenAI-compatible server (serve --judge-url), beside the
in-process engine and beside the remote driven directly.

Same judge (the embedded one), same engine settings, same 64 SummEval items (8 articles x 8
summaries), rubric summeval-coherence, every defence on:

- in process: `geval-reward serve` with its own vLLM engine, one 64-item Score call;
- ours, remote: `geval-reward serve --judge-url` in front of vLLM's OpenAI server, one
  64-item Score call;
- direct: the same completions requests our server sent (recorded through a loopback proxy in
  a first pass: the same prompts' token ids, the same label reads, the masked reads of the
  bound included), sent straight to the remote by an aiohttp client as a user would write it,
  all in flight within a pool of the same size. The anchor: what the remote costs without us.

Each timed pass starts from a cold prefix cache on the remote (vLLM's /reset_prefix_cache) and
a warm-up call on other articles, so the rubric's prefix is cached, as on a server in use;
rounds alternate the order of ours and direct. Then the other label reads on the same remote:
top-k (k = 20, vLLM's --max-logprobs default) on the 64 items, and prompt-logprobs (exact, one
full prefill per label token) on the first article's 8, against token-ids' rewards.

    python benchmarks/bench_remote_judge.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import threading
from typing import Any

import aiohttp
import common
from aiohttp import web

PORT, REMOTE_PORT, PROXY_PORT = 50470, 50471, 50472
SERVED = "judge"
CONNECTIONS = 128  # our server's default pool per remote (--judge-max-connections), for the direct client too


class Recorder:
    """A loopback proxy in front of the remote that keeps every completions request's body."""

    def __init__(self, remote: str) -> None:
        self.remote, self.bodies = remote, []

    async def forward(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.method == "POST":
            self.bodies.append(json.loads(body))
        async with aiohttp.ClientSession() as session:
            async with session.request(request.method, self.remote + request.path.removeprefix("/v1"),
                                       data=body or None, headers={"content-type": "application/json"}) as answer:
                return web.Response(body=await answer.read(), status=answer.status, content_type="application/json")


async def record(recorder: Recorder, warm: list[dict], items: list[dict]) -> tuple[list[dict], list[dict]]:
    """Our server's requests for the warm-up call and for the timed batch, in that order. The
    proxy runs in a thread of its own: starting our server blocks this one's event loop."""
    from geval_client import AsyncRewardClient

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.forward)
    runner, loop = web.AppRunner(app), asyncio.new_event_loop()

    async def listen() -> None:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", PROXY_PORT).start()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(listen(), loop).result()
    try:
        with common.geval_server(PORT, *_ours(f"http://127.0.0.1:{PROXY_PORT}/v1"), log_name="bench_remote-record"
                                 ) as (address, _):
            async with AsyncRewardClient(address, timeout=3600) as client:
                recorder.bodies.clear()
                await client.score(warm, rubrics=common.RUBRIC)
                warm_bodies = list(recorder.bodies)
                recorder.bodies.clear()
                await client.score(items, rubrics=common.RUBRIC)
                return warm_bodies, list(recorder.bodies)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()


def _ours(url: str, *extra: str) -> tuple[str, ...]:
    return ("--judge-url", url, "--judge-model-name", SERVED, "--no-semscore", *extra)


async def direct(url: str, bodies: list[dict]) -> None:
    """The anchor: every request in flight at once within a pool of CONNECTIONS."""
    connector = aiohttp.TCPConnector(limit=CONNECTIONS)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def one(body: dict) -> dict:
            async with session.post(url + "/completions", json=body) as answer:
                answer.raise_for_status()
                return await answer.json()

        await asyncio.gather(*(one(body) for body in bodies))


async def reset(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(url.removesuffix("/v1") + "/reset_prefix_cache") as answer:
            answer.raise_for_status()


async def timed_score(address: str, pids: list[int], items: list[dict], warm: list[dict], remote_url: str | None):
    """One warm-up call and one timed call; (Timed, the CPU seconds of our server's own process
    (in process: beside its engine's processes, its client side of vLLM included), rewards)."""
    from geval_client import AsyncRewardClient

    async with AsyncRewardClient(address, timeout=3600) as client:
        if remote_url:
            await reset(remote_url)
        await client.score(warm, rubrics=common.RUBRIC)
        ours_before = common.process_cpu_seconds(pids[0])["frontend"]
        async with common.timed(pids) as t:
            results = await client.score(items, rubrics=common.RUBRIC)
        ours_cpu = common.process_cpu_seconds(pids[0])["frontend"] - ours_before
    failed = [r.error.message for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} items failed, e.g. {failed[0]}")
    return t, ours_cpu, [r.reward for r in results]


async def run(rounds: int) -> None:
    info = common.machine()
    docs = common.summeval_docs()
    items = common.grpo_batch(docs[:8])
    warm = [{"prompt": docs[-1].article, "completion": docs[-1].summaries[0]}]
    settings = common.engine_arguments()  # sets the server's vLLM environment here, which the remote inherits
    rows: dict[str, dict[str, Any]] = {}

    def add(name: str, t, cpu_ours: float | None, n: int) -> None:
        row = rows.setdefault(name, {"rates": [], "cpu": [], "ours_cpu": []})
        row["rates"].append(n / t.seconds)
        row["cpu"].append(t.cpu_seconds / n)
        if cpu_ours is not None:
            row["ours_cpu"].append(cpu_ours / n)

    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # /reset_prefix_cache
    flags = {**settings, "served_model_name": SERVED}
    with common.vllm_openai_server(REMOTE_PORT, common.embedded_model_path(), flags, log_name="bench_remote-vllm"
                                   ) as (url, remote_pid):
        warm_bodies, bodies = await record(Recorder(url), warm, items)
        with common.geval_server(PORT, *_ours(url), log_name="bench_remote-ours") as (address, pid):
            for round_ in range(rounds):
                for which in (("ours", "direct") if round_ % 2 == 0 else ("direct", "ours")):
                    if which == "ours":
                        t, cpu, remote_rewards = await timed_score(address, [pid, remote_pid], items, warm, url)
                        add("ours, remote (token-ids)", t, cpu, len(items))
                    else:
                        await reset(url)
                        await direct(url, warm_bodies)
                        before = common.own_cpu_seconds()
                        async with common.timed([remote_pid]) as t:
                            await direct(url, bodies)
                        add("direct aiohttp client", t, common.own_cpu_seconds() - before, len(items))
                    print(f"{which}: {len(items) / t.seconds:.2f} items/s", flush=True)
        reads = {}
        for read, subset in (("top-k", items), ("prompt-logprobs", items[:8])):
            with common.geval_server(PORT, *_ours(url, "--judge-read", read), log_name=f"bench_remote-{read}"
                                     ) as (address, pid):
                t, cpu, rewards = await timed_score(address, [pid, remote_pid], subset, warm, url)
            add(f"ours, remote ({read})", t, cpu, len(subset))
            reads[read] = max(abs(a - b) for a, b in zip(rewards, remote_rewards))
            print(f"{read}: {len(subset) / t.seconds:.2f} items/s", flush=True)

    for _ in range(rounds):  # fresh in-process servers, alone on the machine (the remote stopped)
        with common.geval_server(PORT, log_name="bench_remote-in-process") as (address, pid):
            t, cpu, in_process = await timed_score(address, [pid], items, warm, None)
        add("in process", t, cpu, len(items))
        print(f"in process: {len(items) / t.seconds:.2f} items/s", flush=True)

    anchor = statistics.mean(rows["direct aiohttp client"]["rates"])
    table = []
    for name, row in rows.items():
        mean = statistics.mean(row["rates"])
        table.append([name, ", ".join(f"{r:.2f}" for r in row["rates"]), f"{mean:.2f}",
                      f"{mean / anchor:.2f}x" if "remote" in name or "direct" in name else "-",
                      f"{statistics.mean(row['cpu']):.3f}",
                      f"{statistics.mean(row['ours_cpu']) * 1000:.1f}" if row["ours_cpu"] else "-"])
    largest = max(abs(a - b) for a, b in zip(remote_rewards, in_process))
    common.report(
        "bench_remote_judge", "17. A remote judge: ours in front of vLLM's OpenAI server, beside in-process and direct",
        ["path", "items/s, each round", "items/s, mean", "against direct", "CPU s/item (serving stack)",
         "CPU ms/item, ours (or the client's)"],
        table,
        {"rubric": common.RUBRIC, "judge": "SmolLM2-135M-Instruct (embedded)", "rounds": rounds,
         "items": "SummEval, 8 articles x 8 distinct summaries", "defences": "all on (the defaults)",
         "remote": "python -m vllm.entrypoints.openai.api_server with the server's CPU engine settings",
         **{k: v for k, v in settings.items() if k != "model"}},
        notes=[
            f"Rewards, ours through the remote against in process: largest difference {largest:.5f} "
            f"over {len(items)} items; top-k (k=20) against token-ids: {reads['top-k']:.5f}; prompt-logprobs "
            f"against token-ids (8 items): {reads['prompt-logprobs']:.5f}.",
            f"Direct: the {len(bodies)} completions requests our server sent for the 64 items (recorded through a "
            f"loopback proxy), replayed by aiohttp with {CONNECTIONS} connections; CPU ms/item is the client's.",
            "CPU s/item: every process of the serving stack over the timed call (in process: our server and its "
            "engine; remote: our server and vLLM's API server with its engine; direct: vLLM's). CPU ms/item, ours: "
            "our server's own process (in process its engine's processes are not counted there).",
        ],
        machine_info=info,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(run(parser.parse_args().rounds))


if __name__ == "__main__":
    main()
