"""Benchmark 5: footprint. The server's memory, per process, idle and after a
64-item call; the client's import time and memory in a fresh interpreter, and
that it loads neither torch nor vLLM.

    python benchmarks/bench_footprint.py [--port 50405]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

import common
import psutil

CLIENT_RUNS = 5
HEAVY_MODULES = ("torch", "vllm", "transformers")

# Runs in a fresh interpreter: import cost, then one real call when a server is given.
_CLIENT_PROBE = f"""
import json, sys, time, psutil
process = psutil.Process()
before = process.memory_info().rss
started = time.perf_counter()
import geval_client
import_s = time.perf_counter() - started
after_import = process.memory_info().rss
result = {{"import_s": import_s, "rss_before": before, "rss_after_import": after_import,
          "heavy": [m for m in {HEAVY_MODULES!r} if m in sys.modules]}}
if len(sys.argv) > 1:
    items = json.loads(sys.stdin.read())
    with geval_client.RewardClient(sys.argv[1]) as client:
        client.score(items, rubrics={common.RUBRIC!r})
    result["rss_after_call"] = process.memory_info().rss
    result["heavy_after_call"] = [m for m in {HEAVY_MODULES!r} if m in sys.modules]
print(json.dumps(result))
"""


def client_probe(address: str | None = None, items: list[dict] | None = None) -> dict:
    """Without an address: import only. The items go on stdin (too long for argv)."""
    command = [sys.executable, "-c", _CLIENT_PROBE, *([address] if address else [])]
    out = subprocess.run(command, input=json.dumps(items or []), check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def process_kind(process: psutil.Process) -> str:
    name = " ".join(process.cmdline()[:1] + [process.name()])
    for kind in ("EngineCore", "Worker"):
        if kind in name:
            return f"vLLM {kind.lower()}"
    return "frontend (gRPC, tokenizer)"


def server_memory(pid: int) -> dict[str, float]:
    root = psutil.Process(pid)
    memory: dict[str, float] = {}
    for process in [root, *root.children(recursive=True)]:
        kind = process_kind(process)
        memory[kind] = memory.get(kind, 0.0) + process.memory_info().rss / 2**20
    memory["total"] = sum(memory.values())
    return memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=50405)
    args = parser.parse_args()
    info = common.machine()
    items = common.grpo_batch(common.summeval_docs()[:8])

    probes = [client_probe() for _ in range(CLIENT_RUNS)]
    with common.geval_server(args.port, log_name="bench_footprint-server") as (address, pid):
        idle = server_memory(pid)
        call_probe = client_probe(address, items)
        busy = server_memory(pid)

    mib = 2**20
    rows = [[f"server: {kind}", round(idle[kind]), round(busy.get(kind, 0.0))] for kind in idle]
    import_s = statistics.median(p["import_s"] for p in probes)
    import_mib = statistics.median((p["rss_after_import"] - p["rss_before"]) / mib for p in probes)
    rows += [
        ["client: interpreter + `import geval_client` (RSS)",
         round(statistics.median(p["rss_after_import"] for p in probes) / mib), "-"],
        ["client: added by `import geval_client`", round(import_mib), "-"],
        ["client: after one 64-item call (RSS)", "-", round(call_probe["rss_after_call"] / mib)],
    ]
    runs = ", ".join(f"{p['import_s'] * 1000:.0f}" for p in probes)
    heavy = sorted({m for p in probes for m in p["heavy"]} | set(call_probe["heavy_after_call"]))
    common.report(
        "bench_footprint",
        "5. Footprint",
        ["what", "MiB idle / after import", "MiB after a 64-item call"],
        rows,
        {"judge": "SmolLM2-135M-Instruct (embedded)", **common.engine_settings()},
        notes=[
            f"Client import time: {import_s * 1000:.0f} ms (median of {CLIENT_RUNS} fresh interpreters; "
            f"runs: {runs} ms).",
            f"Heavy modules loaded by the client: {heavy or 'none'} (checked: {', '.join(HEAVY_MODULES)}).",
            "Server RSS counts shared pages once per process, so the total is an upper bound.",
        ],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
