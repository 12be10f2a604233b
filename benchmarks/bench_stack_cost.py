"""Benchmark 15: the stack's own cost per item, with judges that compute little.

On a GPU a judge's compute per item falls a hundredfold, and what the server spends per
item on the CPU (the gRPC frontend, the defences, vLLM's client side and scheduler) decides
how many items a second a card can score. Here the judges have random weights
(common.random_judge: vLLM's `--load-format dummy`, the embedded judge's tokenizer), from
one that computes almost nothing to the embedded judge's shape. Per judge, each on fresh
processes, the same GRPO-shaped SummEval items (64 articles x 8 summaries, in 64-item calls
from 4 concurrent callers, after one untimed call of other articles):

- engine alone: vLLM's AsyncLLM in this process, fed the token ids our prompts hold, reading
  the same label tokens at the slot (no gRPC, no judge, no defences);
- ours as shipped, every defence on;
- ours without defences (`--keep-score-claims --no-masked-read-bound`);
- `vllm serve`: the completions API fed the same token ids, the top 20 log-probabilities at
  the slot, from an OpenAI client.

Printed per run: items/s, and CPU milliseconds per item of each process: the frontend (ours:
gRPC, our code, the tokenizer and vLLM's client side; engine alone: vLLM's client side and the
loop feeding it), vLLM's engine core (the scheduler) and its worker (the model). The engine
core and worker are the same processes whoever feeds them; where the judge computes little,
the frontend's share is what a GPU would leave. All runs are eager (`--enforce-eager`), so
start-up compiles nothing.

`--before COMMIT` runs each of ours on that commit's code too, side by side. `--rewards`
instead checks that this code's rewards equal those of `--before COMMIT` bit for bit on the
real embedded judge in float32 (one caller, so both servers batch alike).

    python benchmarks/bench_stack_cost.py [--judges tiny,small,135m] [--runs engine,ours,...] [--before COMMIT]
    python benchmarks/bench_stack_cost.py --rewards --before COMMIT
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import pathlib
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import common

RUNS = ("engine", "ours", "ours-no-defences", "vllm-serve")
TIMED_ARTICLES = 64
CLIENTS = 4
TOP_LOGPROBS = 20  # what `vllm serve`'s client asks for at the slot
NO_DEFENCES = ("--keep-score-claims", "--no-masked-read-bound")


@contextlib.contextmanager
def cpu_by_role(pid: int, items: int, into: dict):
    """CPU milliseconds per item of `pid`'s processes by role over the block, and this
    process's (the callers') when `pid` is another process."""
    before, own = common.process_cpu_seconds(pid), common.own_cpu_seconds()
    yield
    after = common.process_cpu_seconds(pid)
    for role, seconds in after.items():
        into[role] = (seconds - before.get(role, 0.0)) / items * 1e3
    if pid != os.getpid():
        into["callers"] = (common.own_cpu_seconds() - own) / items * 1e3


async def in_calls(read: Callable[[Any], Awaitable[None]], calls: list[list]) -> None:
    """`calls` from CLIENTS concurrent callers, each in turn, a call's reads in flight together:
    the shape of ours' Score calls, for the runs that read item by item."""
    queue = list(calls)

    async def caller() -> None:
        while queue:
            await asyncio.gather(*(read(entry) for entry in queue.pop(0)))

    await asyncio.gather(*(caller() for _ in range(CLIENTS)))


async def engine_alone(model: pathlib.Path, items: list[dict], warm: list[dict]) -> dict:
    """AsyncLLM with the server's engine settings, 64-item calls from 4 concurrent callers,
    each call's requests in flight together."""
    from geval_server.engine.vllm_engine import VllmEngine, engine_input
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM

    prompts = common.JudgePrompts()
    labels = list(prompts.prepared.slot.all_label_token_ids)
    settings = VllmEngine(str(model), {"load_format": "dummy", "enforce_eager": True}).settings
    started = time.perf_counter()
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(model=str(model), **settings))
    start_seconds = time.perf_counter() - started
    request_ids = itertools.count()

    async def read(prompt_ids: list[int]) -> None:
        params = SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=labels, detokenize=False,
                                output_kind=RequestOutputKind.FINAL_ONLY)
        async for _ in engine.generate(engine_input(prompt_ids), params, request_id=str(next(request_ids))):
            pass

    # The prompts' token ids are made beforehand: what is timed is vLLM's alone.
    timed_ids = common.calls([prompts.ids(item) for item in items])
    try:
        await in_calls(read, [[prompts.ids(item) for item in warm]])
        measured: dict = {"start s": start_seconds}
        with cpu_by_role(os.getpid(), len(items), measured):
            started = time.perf_counter()
            await in_calls(read, timed_ids)
            measured["seconds"] = time.perf_counter() - started
    finally:
        engine.shutdown()
    return measured


async def ours(port: int, model: pathlib.Path, items: list[dict], warm: list[dict], flags: tuple[str, ...],
               tree: pathlib.Path) -> dict:
    """`tree`'s server and client code (this checkout's, or --before's)."""
    env = {"PYTHONPATH": os.pathsep.join([str(tree / "server"), str(tree / "client")])}
    started = time.perf_counter()
    with common.geval_server(port, "--model", str(model), "--load-format", "dummy", "--enforce-eager",
                             "--no-semscore", *flags, log_name=f"stack-cost-ours{'-bare' if flags else ''}", env=env
                             ) as (address, pid):
        measured: dict = {"start s": time.perf_counter() - started}
        await common.score_concurrently(address, [warm], 1)
        with cpu_by_role(pid, len(items), measured):
            started = time.perf_counter()
            await common.score_concurrently(address, common.calls(items), CLIENTS)
            measured["seconds"] = time.perf_counter() - started
    return measured


async def vllm_serve(port: int, model: pathlib.Path, items: list[dict], warm: list[dict]) -> dict:
    from geval_server.engine.vllm_engine import VllmEngine
    from openai import AsyncOpenAI

    prompts = common.JudgePrompts()
    settings = VllmEngine(str(model), {"load_format": "dummy", "enforce_eager": True}).settings
    started = time.perf_counter()
    with common.vllm_openai_server(port, str(model), settings, log_name="stack-cost-vllm-serve") as (base_url, pid):
        measured: dict = {"start s": time.perf_counter() - started}
        client = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=3600)
        model_id = (await client.models.list()).data[0].id

        async def read(item: dict) -> None:
            await client.completions.create(model=model_id, prompt=prompts.ids(item), max_tokens=1, temperature=0.0,
                                            logprobs=TOP_LOGPROBS)

        await in_calls(read, [warm])
        with cpu_by_role(pid, len(items), measured):
            started = time.perf_counter()
            await in_calls(read, common.calls(items))
            measured["seconds"] = time.perf_counter() - started
        await client.close()
    return measured


def measure(args: argparse.Namespace) -> None:
    info = common.machine()
    docs = common.summeval_docs()
    items = common.grpo_batch(docs[:TIMED_ARTICLES])
    warm = common.grpo_batch(docs[TIMED_ARTICLES:TIMED_ARTICLES + 8])
    rows, columns = [], ["judge", "run", "start s", "items/s", "vs engine alone", "frontend", "engine core",
                         "worker", "callers", "CPU ms/item, all"]
    runs = args.runs.split(",")
    scratch = tempfile.TemporaryDirectory()
    trees = {"": common.ROOT}
    if args.before:  # each of our runs on that commit's code too
        from bench_frontend import export

        trees[f" ({args.before})"] = export(args.before, pathlib.Path(scratch.name))
        runs = [f"{run}{label}" for run in runs for label in (trees if run.startswith("ours") else [""])]
    for judge in args.judges.split(","):
        model = common.random_judge(judge)
        measured: dict[str, list[dict]] = {run: [] for run in runs}
        # Each round in turn forwards and backwards, so a drift in the machine's load favours no run.
        for run in [r for round_ in range(args.rounds) for r in (runs if round_ % 2 == 0 else runs[::-1])]:
            if run == "engine":
                m = asyncio.run(engine_alone(model, items, warm))
            elif run == "vllm-serve":
                m = asyncio.run(vllm_serve(args.port, model, items, warm))
            else:
                name, _, commit = run.partition(" ")
                m = asyncio.run(ours(args.port, model, items, warm, NO_DEFENCES if name == "ours-no-defences" else (),
                                     trees[commit and f" {commit}"]))
            measured[run].append(m)
            print(f"{judge} {run}: {len(items) / m['seconds']:.0f} items/s, " + ", ".join(
                f"{role} {ms:.2f} ms/item" for role, ms in m.items() if role not in ("seconds", "start s")), flush=True)
        mean = {run: {key: statistics.mean(m.get(key, 0.0) for m in ms) for key in {k for m in ms for k in m}}
                for run, ms in measured.items()}
        alone = mean.get("engine")
        for run, m in mean.items():
            roles = [m.get(role, 0.0) for role in ("frontend", "engine core", "worker")]
            rows.append([judge, run, round(m["start s"]), round(len(items) / m["seconds"]),
                         f"{alone['seconds'] / m['seconds']:.2f}x" if alone else "",
                         *(round(ms, 2) for ms in roles), round(m.get("callers", 0.0), 2),
                         round(sum(roles) + m.get("other", 0.0), 2)])
    common.report(
        "bench_stack_cost", "15. The stack's own cost per item: judges that compute little",
        columns, rows,
        {"judges": {j: common.RANDOM_JUDGE_SHAPES[j] or "SmolLM2-135M's" for j in args.judges.split(",")},
         "weights": "random (--load-format dummy)", "tokenizer": "SmolLM2-135M-Instruct (embedded)",
         "items": f"{len(items)}: {TIMED_ARTICLES} SummEval articles x 8 summaries, 64-item calls",
         "callers": CLIENTS, "eager": True, "rubric": common.RUBRIC, "rounds": args.rounds},
        notes=["CPU columns: milliseconds per item of each process over the timed calls; frontend: the process "
               "that takes the calls (ours: gRPC, our code, the tokenizer, vLLM's client side; engine alone: "
               "vLLM's client side and the loop feeding it); callers: the clients' process, not counted in 'all'.",
               "vs engine alone: items/s over the engine alone's, side by side in this run; every figure is "
               f"the mean of {args.rounds} fresh processes, run forwards then backwards."],
        machine_info=info,
    )


async def rewards_of(tree: pathlib.Path, port: int, items: list[dict], label: str) -> list[tuple]:
    """Every reward and expected score of one caller's calls on `tree`'s server, float32."""
    from geval_client import AsyncRewardClient

    env = {"PYTHONPATH": os.pathsep.join([str(tree / "server"), str(tree / "client")])}
    flags = ("--dtype", "float32", "--enforce-eager", "--no-semscore")
    with common.geval_server(port, *flags, log_name=f"stack-cost-rewards-{label}", env=env) as (address, _):
        async with AsyncRewardClient(address, timeout=3600) as client:
            results = [r for batch in common.calls(items) for r in await client.score(batch, rubrics=common.RUBRIC)]
    return [(r.reward, tuple(s.expected_score for s in r.scores)) for r in results]


def check_rewards(args: argparse.Namespace) -> None:
    from bench_frontend import export

    docs = common.summeval_docs()
    items = common.grpo_batch(docs[:args.reward_articles])
    with tempfile.TemporaryDirectory() as scratch:
        before = export(args.before, pathlib.Path(scratch))
        runs = {"before": asyncio.run(rewards_of(before, args.port, items, "before")),
                "after": asyncio.run(rewards_of(common.ROOT, args.port, items, "after"))}
    same = sum(a == b for a, b in zip(runs["before"], runs["after"]))
    largest = max(abs(a[0] - b[0]) for a, b in zip(runs["before"], runs["after"]))
    print(f"{same} of {len(items)} items bit-identical to {args.before}; largest reward difference {largest:.2e}")
    if same != len(items):
        raise SystemExit("the rewards differ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", default="tiny,small,135m", help=f"of {', '.join(common.RANDOM_JUDGE_SHAPES)}")
    parser.add_argument("--runs", default=",".join(RUNS), help=f"of {', '.join(RUNS)}")
    parser.add_argument("--rounds", type=int, default=2, help="fresh processes per judge and run")
    parser.add_argument("--port", type=int, default=50431)
    parser.add_argument("--rewards", action="store_true", help="check rewards against --before instead")
    parser.add_argument("--before", metavar="COMMIT", help="the code to compare with: each of our runs on it too, "
                        "or with --rewards the rewards")
    parser.add_argument("--reward-articles", type=int, default=16, help="with --rewards: articles x 8 summaries")
    args = parser.parse_args()
    if args.rewards:
        if not args.before:
            parser.error("--rewards needs --before COMMIT")
        check_rewards(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
