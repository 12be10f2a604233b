"""Benchmark 13: a fleet of judge replicas behind one client.

(a) Simulated: N = 1, 2, 4, 8 replica processes of the real server on the null engine
(geval_server/engine/null_engine.py with `serial`: reads compute one at a time, a modelled
`--seconds-per-token` for every prompt token the replica's own prefix cache does not hold),
so the modelled compute dominates and a replica's throughput is bounded as a busy
accelerator's is. One GRPO-shaped step, 64 SummEval articles x 8 summaries, is scored three
ways: one Score call over the fleet (the client's group affinity), the same call through one
gRPC round_robin channel (whole calls spread: the call lands on one replica), and the items
dealt to the replicas in turn (balanced, no affinity). Each run's articles are new to the
replicas (a tag in front of each), as each step brings new prompts. Measured: step seconds,
and per replica the share of prompt tokens its prefix cache held during the step.

(c) A replica killed (SIGKILL) a third of the way into a step of N = 4: items lost, doubled,
and seconds added against the same step unharmed.

(b) With --real, instead: per number format (the server's default, and float32), two fresh
real `geval-reward serve` replicas (the embedded judge, small KV cache) score 64 items as one
call; items per replica, rewards against one replica's, and the two replicas' against each other.

    python benchmarks/bench_fleet.py [--seconds-per-token 1e-3] [--round-robin-at 2]
    python benchmarks/bench_fleet.py --real
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import os
import signal
import subprocess
import sys
import time

import common

REPLICA_COUNTS = (1, 2, 4, 8)
PROMPTS, COMPLETIONS = 64, 8
RUBRIC = common.RUBRIC
REAL_ARGS = ("--no-semscore", "--kv-cache-memory-bytes", str(1 << 30))


# ---- a null-engine replica process --------------------------------------------------------


async def serve_null(seconds_per_token: float) -> None:
    """One replica: the real server on the serial null engine; prints `ready PORT`; stops on SIGTERM."""
    from geval_server import server as server_module
    from geval_server.config import ServeConfig
    from geval_server.engine.embedded_model import EMBEDDED_MODEL
    from geval_server.engine.null_engine import NullEngine
    from geval_server.scorers.registry import default_settings

    config = ServeConfig(model=EMBEDDED_MODEL, port=0, kinds=default_settings(leave_out=["semscore"]))
    engine = functools.partial(NullEngine, seconds_per_token=seconds_per_token, serial=True)
    judge = await server_module.start_judge(config, make_engine=engine)
    server, _, port = server_module.build_server(judge, config)
    await server.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"ready {port}", flush=True)
    await stop.wait()
    await server.stop(grace=0)


def start_replicas(n: int, seconds_per_token: float) -> list[tuple[subprocess.Popen, str]]:
    processes = [subprocess.Popen([sys.executable, __file__, "--serve-null", str(seconds_per_token)],
                                  stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
                 for _ in range(n)]
    replicas = []
    for process in processes:
        line = process.stdout.readline()
        if not line.startswith("ready "):
            raise RuntimeError(f"a null replica failed to start: {line!r}")
        replicas.append((process, f"127.0.0.1:{line.split()[1]}"))
    return replicas


def stop_replicas(replicas) -> None:
    for process, _ in replicas:
        if process.poll() is None:
            process.terminate()
    for process, _ in replicas:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ---- the step -------------------------------------------------------------------------------


def step_items(docs, tag: str) -> list[dict]:
    """64 articles x 8 summaries, each article behind a tag new to the replicas."""
    items = common.grpo_batch(docs[:PROMPTS], COMPLETIONS)
    return [{**item, "prompt": f"[{tag}] {item['prompt']}"} for item in items]


def cache_counts(addresses: list[str]) -> dict[str, tuple[int, int]]:
    from geval_client import RewardClient

    counts = {}
    for address in addresses:
        with RewardClient(address) as client:
            settings = client.info().engine_settings
        counts[address] = (int(settings["prefix_cache_read_tokens"]), int(settings["prefix_cache_hit_tokens"]))
    return counts


def hit_rates(before: dict, after: dict) -> list[float]:
    """Per replica that read anything during the step: the share of its prompt tokens its cache held."""
    rates = []
    for address in after:
        read = after[address][0] - before[address][0]
        if read:
            rates.append((after[address][1] - before[address][1]) / read)
    return rates


def score_fleet(addresses: list[str], items: list[dict]) -> list:
    from geval_client import RewardClient

    with RewardClient(addresses if len(addresses) > 1 else addresses[0], timeout=1800) as client:
        return client.score(items, rubrics=RUBRIC)


def score_round_robin(addresses: list[str], items: list[dict]) -> list:
    from geval_client import RewardClient

    with RewardClient("ipv4:" + ",".join(addresses), timeout=1800) as client:
        return client.score(items, rubrics=RUBRIC)


def score_dealt(addresses: list[str], items: list[dict]) -> list:
    """Item i to replica i mod N, one call per replica at once: balanced, no affinity."""
    from concurrent.futures import ThreadPoolExecutor

    from geval_client import RewardClient

    def one(k: int) -> list:
        with RewardClient(addresses[k], timeout=1800) as client:
            return client.score(items[k::len(addresses)], rubrics=RUBRIC)

    with ThreadPoolExecutor(len(addresses)) as pool:
        parts = list(pool.map(one, range(len(addresses))))
    results = [None] * len(items)
    for k, part in enumerate(parts):
        results[k::len(addresses)] = part
    return results


STRATEGIES = {"group affinity (fleet client)": score_fleet, "whole-call round robin": score_round_robin,
              "balanced, no affinity": score_dealt}


def timed_step(strategy, addresses: list[str], items: list[dict]) -> tuple[float, list[float], list]:
    before = cache_counts(addresses)
    started = time.perf_counter()
    results = strategy(addresses, items)
    seconds = time.perf_counter() - started
    failed = [r for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} items failed, e.g. {failed[0].error}")
    return seconds, hit_rates(before, cache_counts(addresses)), results


def simulated(docs, seconds_per_token: float, round_robin_at: tuple[int, ...]) -> tuple[list[list], list[str]]:
    replicas = start_replicas(max(REPLICA_COUNTS), seconds_per_token)
    addresses = [address for _, address in replicas]
    rows, notes, runs = [], [], 0
    try:
        score_fleet(addresses[:1], step_items(docs, "warm-up")[:8])  # tokenizer and code paths warm
        one_replica = None
        for n in REPLICA_COUNTS:
            for name, strategy in STRATEGIES.items():
                if n == 1 and name != "group affinity (fleet client)":
                    continue  # one replica: every strategy is the same call
                if name == "whole-call round robin" and n not in round_robin_at:
                    continue  # the one call lands on one replica whatever N: measured once
                runs += 1
                seconds, rates, _ = timed_step(strategy, addresses[:n], step_items(docs, f"run {runs}"))
                one_replica = one_replica or (seconds, rates[0])
                rows.append([n, name, round(seconds, 2), round(one_replica[0] / seconds, 2),
                             round(100 * sum(rates) / len(rates), 1), round(100 * min(rates), 1),
                             round(100 * (sum(rates) / len(rates) - one_replica[1]), 1)])
                print(rows[-1], flush=True)
        kill_row = killed_mid_step(docs, addresses[:4], replicas[:4], runs)
        notes.append(kill_row)
    finally:
        stop_replicas(replicas)
    return rows, notes


def killed_mid_step(docs, addresses: list[str], replicas, runs: int) -> str:
    """(c): the same step unharmed and with one replica SIGKILLed a third of the way in."""
    from concurrent.futures import ThreadPoolExecutor

    unharmed, _, _ = timed_step(score_fleet, addresses, step_items(docs, f"run {runs + 1}"))
    items = step_items(docs, f"run {runs + 2}")
    with ThreadPoolExecutor(1) as pool:
        started = time.perf_counter()
        pending = pool.submit(score_fleet, addresses, items)
        time.sleep(unharmed / 3)
        replicas[-1][0].send_signal(signal.SIGKILL)
        results = pending.result()
        seconds = time.perf_counter() - started
    ids = collections.Counter(r.id for r in results)
    lost = len(items) - len(ids)
    doubled = sum(count - 1 for count in ids.values())
    wrong_order = sum(r.id != str(i) for i, r in enumerate(results))
    return (f"(c) One of 4 replicas SIGKILLed {unharmed / 3:.1f} s into a step of {len(items)} items: "
            f"{len(results)} results, {lost} items lost, {doubled} doubled, {wrong_order} out of order; "
            f"{seconds:.2f} s against {unharmed:.2f} s unharmed (+{seconds - unharmed:.2f} s: the killed "
            "replica's share sent to the 3 others once its connection dropped).")


# ---- (b): two real replicas ---------------------------------------------------------------


def real_replicas(docs) -> tuple[list[list], list[str]]:
    """Per number format, two fresh real replicas: one call of 64 items over both, then the
    same items on each alone. Rewards: the fleet's against one replica's, and the two fresh
    replicas' against each other."""
    from geval_client import RewardClient

    items = common.grpo_batch(docs[:8], COMPLETIONS)
    rows = []
    for dtype in ("default", "float32"):
        args = (*REAL_ARGS, *(("--dtype", dtype) if dtype != "default" else ()))
        with common.geval_server(0, *args, log_name="fleet_a") as (first, _), \
                common.geval_server(0, *args, log_name="fleet_b") as (second, _):
            with RewardClient(first) as client:
                served = client.info().engine_settings["dtype"]
            with RewardClient([first, second], timeout=1800) as client:
                started = time.perf_counter()
                fleet = client.score(items, rubrics=RUBRIC)
                fleet_s = time.perf_counter() - started
                load = sorted(client.replica_load().values())
            alone = {}
            for address in (first, second):
                with RewardClient(address, timeout=1800) as client:
                    started = time.perf_counter()
                    alone[address] = (client.score(items, rubrics=RUBRIC), time.perf_counter() - started)

        def largest(a, b):
            return max(abs(x.reward - y.reward) for x, y in zip(a, b))

        rows.append([f"{dtype} ({served})", str(load), round(fleet_s, 1), round(alone[first][1], 1),
                     f"{largest(fleet, alone[first][0]):.1e}", f"{largest(alone[first][0], alone[second][0]):.1e}"])
        print(rows[-1], flush=True)
    notes = [f"One Score call of {len(items)} items (8 SummEval articles x 8 summaries, {RUBRIC}) over two fresh "
             "replicas (the embedded judge, 1 GiB KV cache each), then the same items on each replica alone. "
             "Largest |reward difference|: the fleet's against replica A's, and replica A's against replica B's "
             "(two fresh servers, the same items, the same call shape)."]
    return rows, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds-per-token", type=float, default=1e-3,
                        help="modelled compute per uncached prompt token of a null replica")
    parser.add_argument("--round-robin-at", type=int, nargs="+", default=[2],
                        help="replica counts to run whole-call round robin at (it takes N=1's time at every N)")
    parser.add_argument("--real", action="store_true", help="(b) only: two real embedded replicas")
    args = parser.parse_args()
    info = common.machine()
    docs = common.summeval_docs()
    if args.real:
        rows, notes = real_replicas(docs)
        common.report(
            "bench_fleet_real", "Two real replicas: items per replica, rewards against one server's",
            ["number format", "items per replica", "fleet s", "one replica s", "fleet vs A", "A vs B"],
            rows, {"judge": "SmolLM2-135M-Instruct (embedded)", "rubric": RUBRIC}, notes=notes,
            machine_info=info, level=4,
        )
        return
    rows, notes = simulated(docs, args.seconds_per_token, args.round_robin_at)
    notes = [f"(a) One step: {PROMPTS} SummEval articles x {COMPLETIONS} summaries as one Score call "
             f"({RUBRIC}); every run's articles new to the replicas. Speed-up: N=1's step seconds over this row's. "
             "Hit rate: share of a replica's prompt tokens its modelled prefix cache held during the step, "
             "mean and lowest over the replicas that read; points: mean against one replica's. Whole-call round "
             "robin sends the one call to one replica whatever N.",
             *notes]
    common.report(
        "bench_fleet",
        "13. A fleet of replicas behind one client: group affinity vs round robin vs balancing alone",
        ["replicas", "spread", "step s", "speed-up", "hit rate %", "lowest %", "points vs one"],
        rows,
        {"replica engine": f"null, serial, {args.seconds_per_token:g} s per uncached prompt token",
         "step": f"{PROMPTS} x {COMPLETIONS}", "rubric": RUBRIC},
        notes=notes,
        machine_info=info,
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-null"]:
        asyncio.run(serve_null(float(sys.argv[2])))
    else:
        main()
