"""Benchmark 6: the limit. The judge's prefill work in FLOPs per item against the
FLOP/s this machine reaches on a large matrix product.

FLOPs are counted from the model's shape: per computed token 2 x the weights of
every linear layer plus attention over the tokens before it (4 x layers x
hidden x position), and the LM head once per item (only the score slot's logits
are computed). The engine runs in this process with the server's settings:
first with prefix caching off, so every prompt token is computed and its FLOP/s
is exact; then with caching on, on a GRPO batch, where the tokens it computes
are modelled from the block-aligned prefixes the batch shares.

    python benchmarks/bench_limit.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import time
from dataclasses import dataclass

import common

MATMUL_N = 4096
MATMUL_REPEATS = 5


@dataclass(frozen=True)
class ModelShape:
    layers: int
    hidden: int
    intermediate: int
    kv_dim: int
    vocab: int

    @classmethod
    def load(cls, model_path: str) -> ModelShape:
        config = json.loads((pathlib.Path(model_path) / "config.json").read_text())
        head_dim = config["hidden_size"] // config["num_attention_heads"]
        return cls(config["num_hidden_layers"], config["hidden_size"], config["intermediate_size"],
                   config["num_key_value_heads"] * head_dim, config["vocab_size"])

    def prefill_flops(self, length: int, cached: int = 0) -> float:
        """FLOPs to compute tokens cached..length-1 of a prompt and the next-token logits."""
        d = self.hidden
        linear = 2 * self.layers * (2 * d * d + 2 * d * self.kv_dim + 3 * d * self.intermediate)
        positions = sum(range(cached + 1, length + 1))  # keys each computed token attends to
        return linear * (length - cached) + 4 * self.layers * d * positions + 2 * d * self.vocab


def cached_tokens(prompts: list[list[int]], block: int, warm: list[int]) -> list[int]:
    """Prefix-cache hits per prompt, in token order: whole blocks of the longest
    prefix shared with a prompt before it (vLLM always recomputes the last token)."""
    from geval_server.scorers.geval.slot import common_prefix

    order = sorted(range(len(prompts)), key=lambda i: prompts[i])
    seen, hits = [warm], [0] * len(prompts)
    for i in order:
        shared = max(len(common_prefix([prompts[i], other])) for other in seen)
        hits[i] = min(shared, len(prompts[i]) - 1) // block * block
        seen.append(prompts[i])
    return hits


def matmul_flops(n: int, m: int, k: int, repeats: int, threads: int, dtype: str) -> list[float]:
    """FLOP/s of (n x k) @ (k x m) products in the engine's number format on `threads`
    threads, each the better of torch's BLAS (MKL) and vLLM's oneDNN kernel, the one the
    engine's linear layers use: on AMD CPUs MKL may take a narrower vector path than the
    machine has. (A float32 peak beside a bfloat16 engine read 239%: AMX computes bfloat16
    at several times float32's rate.)"""
    import torch
    from vllm import _custom_ops as ops

    torch.set_num_threads(threads)
    a, b = torch.randn(n, k, dtype=getattr(torch, dtype)), torch.randn(k, m, dtype=getattr(torch, dtype))
    kernels = [lambda: torch.mm(a, b)]
    if ops._supports_onednn:
        handler = ops.create_onednn_mm(b, 32)
        kernels.append(lambda: ops.onednn_mm(handler, a, None))
    rates = []
    for _ in range(repeats):
        best = 0.0
        for kernel in kernels:
            kernel()
            start = time.perf_counter()
            kernel()
            best = max(best, 2 * n * m * k / (time.perf_counter() - start))
        rates.append(best)
    return rates


async def engine_run(caching: bool, items: list[dict], prompts: common.JudgePrompts, warm: dict):
    """The server's engine driver in this process with the server's settings, caching on or off."""
    from geval_server.engine.vllm_engine import VllmEngine

    ids = [prompts.ids(item) for item in items]
    warm_ids = prompts.ids(warm)
    labels = prompts.prepared.slot.all_label_token_ids
    engine = VllmEngine(common.embedded_model_path(), {"enable_prefix_caching": caching})
    engine.start()
    try:
        await engine.token_logprobs(warm_ids, labels)
        async with common.timed([os.getpid()]) as t:
            await asyncio.gather(*(engine.token_logprobs(p, labels) for p in ids))
        block = engine.block_size
    finally:
        engine.shutdown()
    print(f"engine, caching {'on' if caching else 'off'}: {len(items)} items in {t.seconds:.1f} s "
          f"({t.cpu_seconds:.1f} CPU s)", flush=True)
    return t, ids, warm_ids, block


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # no options; --help
    info = common.machine()
    docs = common.summeval_docs()
    prompts = common.JudgePrompts()
    shape = ModelShape.load(common.embedded_model_path())
    warm = {"prompt": docs[-1].article, "completion": docs[-1].summaries[0]}

    # The peak is the whole machine's: a matmul in the engine's number format on every core.
    # The engine's own share of it (the cores vLLM binds its OpenMP threads to) is noted beside it.
    threads = os.cpu_count()
    dtype = common.engine_settings()["dtype"]
    square = matmul_flops(MATMUL_N, MATMUL_N, MATMUL_N, MATMUL_REPEATS, threads, dtype)
    one_core = max(matmul_flops(MATMUL_N, MATMUL_N, MATMUL_N, MATMUL_REPEATS, 1, dtype))
    model_gemm = matmul_flops(2048, shape.intermediate, shape.hidden, MATMUL_REPEATS, threads, dtype)
    peak = max(square)
    print(f"matmul {MATMUL_N}^3: best {peak / 1e9:.1f} GFLOP/s; model-shaped: {max(model_gemm) / 1e9:.1f}", flush=True)

    off_items = common.grpo_batch(docs[:2])
    grpo_items = common.grpo_batch(docs[2:10])
    t_off, off_ids, _, block = asyncio.run(engine_run(False, off_items, prompts, warm))
    t_on, on_ids, warm_ids, _ = asyncio.run(engine_run(True, grpo_items, prompts, warm))

    off_flops = [shape.prefill_flops(len(p)) for p in off_ids]
    hits = cached_tokens(on_ids, block, warm_ids)
    on_flops = [shape.prefill_flops(len(p), c) for p, c in zip(on_ids, hits)]
    on_full = [shape.prefill_flops(len(p)) for p in on_ids]

    def row(name, n, flops, t):
        per_item = statistics.mean(flops)
        achieved = sum(flops) / t.seconds
        return [name, n, round(per_item / 1e9, 1), round(n / t.seconds, 3), round(achieved / 1e9, 1),
                f"{achieved / peak:.0%}", round(sum(flops) / t.cpu_seconds / 1e9, 1), round(peak / per_item, 3)]

    rows = [
        row("caching off (every token computed)", len(off_items), off_flops, t_off),
        row("GRPO 8x8, caching on (computed tokens only)", len(grpo_items), on_flops, t_on),
    ]
    common.report(
        "bench_limit",
        "6. The limit: prefill FLOPs against the machine's matmul FLOP/s",
        ["run", "items", "GFLOP/item", "items/s", "engine GFLOP/s", "of matmul peak",
         "GFLOP per CPU s", "items/s at matmul peak"],
        rows,
        {"judge": "SmolLM2-135M-Instruct (embedded)", **common.engine_settings(), "kv block size": block,
         "matmul": f"{dtype} {MATMUL_N}x{MATMUL_N}x{MATMUL_N} on all {threads} cores, best of MKL and oneDNN"},
        notes=[
            f"Matmul peak (best of {MATMUL_REPEATS}): {peak / 1e9:.1f} GFLOP/s "
            f"(median {statistics.median(square) / 1e9:.1f}); a model-shaped product "
            f"(2048 x {shape.hidden} @ {shape.hidden} x {shape.intermediate}) reaches "
            f"{max(model_gemm) / 1e9:.1f} GFLOP/s. On one core the square product reaches "
            f"{one_core / 1e9:.1f} GFLOP/s.",
            f"With caching on, the GRPO batch computes {statistics.mean(on_flops) / 1e9:.1f} GFLOP/item instead "
            f"of {statistics.mean(on_full) / 1e9:.1f} (shared prefixes counted once, in whole blocks of {block} "
            f"tokens): the cache removes {1 - sum(on_flops) / sum(on_full):.0%} of the work.",
        ],
        machine_info=info,
    )


if __name__ == "__main__":
    main()
