"""Benchmark 7: the frontend's own ceiling, the real gRPC server in front of an engine
that answers at once: what would cap a GPU engine.

The server process is built as `geval-reward serve` builds it (`prepare_judge`,
`build_server`: call interceptor, bearer-token auth, validation, score-claim removal,
the embedded judge's real tokenizer, prompt assembly, aggregation, protobuf), with the
null engine (geval_server/engine/null_engine.py) in place of vLLM: it answers at once
with log-probabilities of the label tokens asked for that are a function of the prompt's
token ids, so equal rewards mean equal prompts. vLLM's own client side (input and output
processing per request) is not in it.

Load, GRPO-shaped: Score calls of 8 prompts x 8 completions (SummEval articles and
their summaries) from several concurrent clients, in another process. Every article is
new to the server, as every training step brings new prompts: 12 calls cover 96 of
SummEval's 100 articles once. One load names one rubric per call, the other four. Each
load runs twice, on fresh servers: right after start-up (one untimed call of 4 other
articles), and after the server has scored the 474 QAGS news summaries (other articles,
the same kind of text: a server some way into a training run has seen its words before).
Measured: the server process's items/s and CPU seconds per item (all its threads).

`--before COMMIT` serves the same calls from that commit's code too (exported to a
temporary directory), alternating before, after, after, before, ... in one run, and
checks that every reward, expected score and label distribution is bit-identical. The
commit must have the null engine (engine/null_engine.py).

`--vllm` serves with the real engine instead (`geval-reward serve`, the judge computing on
this machine) and measures the frontend process alone, vLLM's client side (its input and
output processing per request) included: two calls, one rubric, as a CPU engine is slow.

    python benchmarks/bench_frontend.py [--before COMMIT] [--clients 4] [--repeats 1] [--vllm]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import pathlib
import re
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

import common
import psutil

TOKEN = "bench-frontend-token"
LOADS = {"1 rubric": ("summeval-coherence",),
         "4 rubrics": ("summeval-coherence", "summeval-consistency", "summeval-fluency", "summeval-relevance")}
TIMED_ARTICLES = 96  # 12 calls; SummEval's other 4 articles warm the server up
VLLM_ARTICLES = 16  # with --vllm: 2 calls
NO_BOUND_ENV = "GEVAL_BENCH_NO_MASKED_READ_BOUND"


# ---- the server process ----------------------------------------------------------------


async def serve_null() -> None:
    """Serves the null-engine judge as `geval-reward serve --no-semscore --api-key TOKEN --port 0`
    would (every preset rubric and likelihood scorer); prints `ready PORT`; stops on SIGTERM."""
    from geval_server import server as server_module
    from geval_server.config import ServeConfig
    from geval_server.defences.chain import DefenceSettings
    from geval_server.engine.embedded_model import EMBEDDED_MODEL
    from geval_server.engine.null_engine import NullEngine

    try:
        from geval_server.scorers.registry import default_settings

        config = ServeConfig(model=EMBEDDED_MODEL, port=0, auth_tokens=(TOKEN,),
                             kinds=default_settings(leave_out=["semscore"]))
    except ImportError:  # a --before tree from before scorer kinds
        config = ServeConfig(model=EMBEDDED_MODEL, port=0, auth_tokens=(TOKEN,), semscore=False)
    if os.environ.get(NO_BOUND_ENV):
        config = dataclasses.replace(config, defences=DefenceSettings(masked_read_bound=False))
    judge = await server_module.start_judge(config, make_engine=NullEngine)
    server, _, port = server_module.build_server(judge, config)
    await server.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    if hasattr(server_module, "settle"):  # as serve() does (code from before it had none)
        server_module.settle()
    print(f"ready {port}", flush=True)
    await stop.wait()
    await server.stop(grace=0)


# ---- the load --------------------------------------------------------------------------


def requests(docs: list, rubrics: tuple[str, ...]) -> list:
    """Score requests of 8 articles x 8 of their summaries (fewer articles in the last)."""
    from geval_client.requests import score_request

    items = common.grpo_batch(docs)
    return [score_request(batch, list(rubrics)) for batch in common.calls(items)]


def scores(response) -> list[tuple]:
    """What must be bit-identical before and after: per item its reward and, per rubric,
    expected score, reward, label mass and distribution (not the content hash, which
    names the code's judge identity)."""
    return [(r.reward, tuple((s.rubric, g.expected_score, s.reward, g.label_mass,
                              tuple(p.probability for p in g.distribution))
                             for s in r.scores for g in [_geval(s)]))
            for r in response.results]


def _geval(score):
    """The G-Eval measurements of a score on the wire: their own message since the proto gave
    each scorer its result (a --before commit may predate it)."""
    return score.geval if hasattr(score, "geval") else score


async def send(port: int, calls: list, clients: int) -> tuple[float, list]:
    """The calls from `clients` concurrent clients (each its own channel, calls in turn);
    returns wall seconds and the responses in call order."""
    import grpc
    from geval_client.pb import reward_pb2_grpc

    metadata = (("authorization", f"Bearer {TOKEN}"),)
    responses: list = [None] * len(calls)
    queue = list(enumerate(calls))

    async def client() -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = reward_pb2_grpc.RewardServiceStub(channel)
            while queue:
                index, request = queue.pop(0)
                responses[index] = await stub.Score(request, metadata=metadata, timeout=600)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return time.perf_counter() - started, responses


@contextlib.contextmanager
def null_server(tree: pathlib.Path, log_path: pathlib.Path):
    """The null-engine server running `tree`'s server and client code; yields (port, pid)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tree / "server"), str(tree / "client"), str(common.ROOT / "benchmarks")])}
    with open(log_path, "w") as log:
        process = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=log, stderr=subprocess.STDOUT,
                                   env=env)
    try:
        while not (ready := re.search(r"^ready (\d+)$", log_path.read_text(), re.M)):
            if process.poll() is not None:
                raise RuntimeError(f"the null-engine server from {tree} exited; log {log_path}")
            time.sleep(0.2)
        yield int(ready.group(1)), process.pid
    finally:
        process.terminate()
        process.wait(timeout=60)


@contextlib.contextmanager
def vllm_server(tree: pathlib.Path, log_path: pathlib.Path):
    """`geval-reward serve` from `tree`'s code with its real engine; yields (port, pid of the
    frontend process, whose CPU alone is measured: gRPC, our code and vLLM's client side)."""
    from geval_server.launcher import start_server, stop_server

    env = {"PYTHONPATH": os.pathsep.join([str(tree / "server"), str(tree / "client")])}
    process, address = start_server(log_path, "--api-key", TOKEN, "--no-semscore", env=env)
    try:
        yield int(address.rsplit(":", 1)[1]), process.pid
    finally:
        stop_server(process)


def measure(tree: pathlib.Path, loads: dict[str, tuple[list, list]], clients: int, label: str,
            serving=None) -> dict[str, tuple]:
    """Per load, on a fresh server each (`serving`: null_server unless given, or vllm_server):
    (wall s, server CPU s, the calls' scores)."""
    measured = {}
    for name, (warm, calls) in loads.items():
        log_path = common.RESULTS_DIR / "logs" / f"bench_frontend-{label}-{re.sub(r'[^a-z0-9]+', '-', name)}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with (serving or null_server)(tree, log_path) as (port, pid):
            process = psutil.Process(pid)
            asyncio.run(send(port, warm, clients))
            before = process.cpu_times()
            seconds, responses = asyncio.run(send(port, calls, clients))
            after = process.cpu_times()
        cpu = after.user + after.system - before.user - before.system
        measured[name] = (seconds, cpu, [scores(r) for r in responses])
    return measured


def export(commit: str, into: pathlib.Path) -> pathlib.Path:
    """`commit`'s server and client code, as `git archive` writes it."""
    archive = into / "tree.tar"
    subprocess.run(["git", "-C", str(common.ROOT), "archive", "--format=tar", "-o", str(archive), commit,
                    "server", "client"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="COMMIT", help="also serve this commit's code, alternating")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients")
    parser.add_argument("--repeats", type=int, default=1, help="fresh servers per tree and load: 2 x this")
    parser.add_argument("--vllm", action="store_true",
                        help=f"the real engine instead (vLLM's client side included; its frontend's CPU measured), "
                             f"one rubric, {VLLM_ARTICLES} articles: slow on a CPU")
    parser.add_argument("--no-masked-read-bound", action="store_true",
                        help="serve without the masked second read (what code from before it does): like for like, "
                             "so rewards can be compared bit for bit")
    args = parser.parse_args()
    if args.no_masked_read_bound:
        os.environ[NO_BOUND_ENV] = "1"
    info = common.machine()
    docs = common.summeval_docs()
    timed, warm = docs[:TIMED_ARTICLES], docs[TIMED_ARTICLES:TIMED_ARTICLES + 4]
    from geval_audit import datasets
    from geval_client.requests import score_request

    news = [{"prompt": r.source, "completion": r.text} for subset in ("cnndm", "xsum") for r in datasets.qags(subset)]
    loads = {}
    for name, rubrics in LOADS.items():
        loads[f"{name}, fresh server"] = (requests(warm, rubrics), requests(timed, rubrics))
        seasoned = [score_request(batch, list(rubrics)) for batch in common.calls(news)]
        loads[f"{name}, after {len(news)} other news items"] = (seasoned, requests(timed, rubrics))
    if args.vllm:
        timed = timed[:VLLM_ARTICLES]
        loads = {"1 rubric, fresh server": (requests(warm[:1], LOADS["1 rubric"]), requests(timed, LOADS["1 rubric"]))}
    n_items = len(common.grpo_batch(timed))

    with tempfile.TemporaryDirectory() as scratch:
        trees = {"after": common.ROOT}
        if args.before:
            trees = {f"before ({args.before})": export(args.before, pathlib.Path(scratch)), **trees}
        order = [name for _ in range(args.repeats) for name in [*trees, *reversed(trees)]]
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        for index, name in enumerate(order):
            runs[name].append(measure(trees[name], loads, args.clients, f"run{index}",
                                      vllm_server if args.vllm else None))
            print(f"server {index + 1} of {len(order)}, {name}: " + ", ".join(
                f"{load}: {n_items / seconds:.0f} items/s, {cpu / n_items * 1e3:.2f} CPU ms/item"
                for load, (seconds, cpu, _) in runs[name][-1].items()), flush=True)

    first = next(iter(runs.values()))[0]
    identical = all(run[load][2] == first[load][2] for measured in runs.values() for run in measured
                    for load in loads)
    largest = max(abs(a[0] - b[0]) for measured in runs.values() for run in measured for load in loads
                  for call, first_call in zip(run[load][2], first[load][2]) for a, b in zip(call, first_call))
    rows, per_core = [], {}
    for name, measured in runs.items():
        for load in loads:
            seconds = statistics.mean(run[load][0] for run in measured)
            cpu = statistics.mean(run[load][1] for run in measured)
            per_core[name, load] = n_items / cpu
            rows.append([name, load, len(measured), round(n_items / seconds), round(cpu / n_items * 1e3, 3),
                         round(n_items / cpu), round(cpu / seconds, 2)])
    n_calls = len(next(iter(loads.values()))[1])
    notes = [f"{n_items} items per load and server ({n_calls} calls of 64, every article new to the server), "
             f"{args.clients} concurrent clients in another process; CPU: the server{' frontend' if args.vllm else ''} "
             "process, all its threads; items/s per core = items / CPU s; cores busy = CPU s / wall s."]
    notes.append("Masked second read: off on every server (like for like: code from before it has none)."
                 if args.no_masked_read_bound else "Masked second read: as the tree serves it by default (on where "
                 "it exists: a SummEval summary with a numeral is read twice).")
    if len(trees) == 2:
        before, after = trees
        same = "bit-identical" if identical else f"differing by at most {largest:.1e} in reward"
        notes.append("After over before, items per CPU second: " + ", ".join(
            f"{per_core[after, load] / per_core[before, load]:.2f}x ({load})" for load in loads)
            + f"; rewards, expected scores and distributions {same}.")
    if args.vllm:
        notes.append("The real engine (vLLM's AsyncLLM, the judge computing on this CPU): items/s are the engine's; "
                     "the frontend's CPU per item is what would cap a faster engine, vLLM's client side included.")
    common.report(
        "bench_frontend_vllm" if args.vllm else
        "bench_frontend_no_bound" if args.no_masked_read_bound else "bench_frontend",
        "With the real engine: the frontend's CPU per item, vLLM's client side included" if args.vllm else
        "Without the masked second read" if args.no_masked_read_bound else
        "7. The frontend's ceiling: the real server in front of an engine that answers at once",
        ["code", "load", "fresh servers", "items/s", "CPU ms/item", "items/s per core", "cores busy"],
        rows,
        {"judge tokenizer": "SmolLM2-135M-Instruct (embedded)", "loads": {k: list(v) for k, v in LOADS.items()},
         "calls": "8 SummEval articles (new to the server) x 8 summaries", "auth": "bearer token"},
        notes=notes,
        machine_info=info,
        level=4 if args.vllm or args.no_masked_read_bound else 3,
    )
    if not identical and not args.vllm:  # a real engine batches differently from run to run
        raise SystemExit("the rewards differ between runs")


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        import logging

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        asyncio.run(serve_null())
    else:
        main()
