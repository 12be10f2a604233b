"""The engine settings the server gives vLLM where a flag is left out, per platform, each with its reason.

Pure: the platform is passed in (vllm_engine.platform() reads it from vLLM), so the choice is
testable without vLLM or a GPU. Nothing of one platform's reaches another: a CPU's environment
variables and KV size never reach a GPU engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from geval_server.engine.dtype import CPU_DTYPE_HELP, DtypeChoice, cpu_dtype

CPU, GPU, OTHER = "cpu", "gpu", "other"  # vLLM's CPU backend; CUDA or ROCm; anything else (TPU, XPU): vLLM's own

ENGINE_DEFAULTS = {"enable_prefix_caching": True}  # GRPO groups share their prompt: see bench_grpo.py

# Settings for the CPU backend. Compiled graphs (vLLM's torch.compile; vLLM's own default):
# the GRPO batch of benchmark 14 read 1.2x faster than eager, and the compilation (about a
# minute) is paid once per model and settings, kept in vLLM's compile cache (see
# CPU_ENVIRONMENT); `--enforce-eager` starts faster where a server lives minutes. The number
# format is chosen for the processor (dtype.py). KV blocks of 32 tokens, the CPU backend's
# smallest, instead of its default of 128: prefix-cache hits come in whole blocks, so every
# completion recomputes its group's shared prefix past the last full block; a GRPO batch ran
# 1.26x faster (benchmarks/bench_grpo.py --block-sizes 32,128).
# On CPU `gpu_memory_utilization` reserves a share of *host* memory up front (0.3 of
# this machine was 5.3 GiB, and a second server then failed to start), so the KV
# cache gets a fixed size instead: 2 GiB holds about 45k tokens of the embedded judge.
CPU_DEFAULTS = {"block_size": 32}
CPU_KV_CACHE_BYTES = 2 * 1024**3
# vLLM's CPU backend keeps a core for its scheduler process unless told otherwise, so
# on a 2-core machine the model computed on one core and half the machine's FLOP/s went
# unused. With none reserved its OpenMP threads bind to every core; the same 64
# SummEval items then ran 1.9x faster with identical rewards (benchmarks/RESULTS.md, every core).
# Users set either variable themselves to share the machine (see the README).
# vLLM 0.32 saves compiled graphs as ahead-of-time artifacts that fail to load on CPU ("has
# no attribute 'finalize_loading'") and compiles again at every start (about 100 s); without
# them its compile cache is read: a restarted server was ready in 42 s against 35 s eager.
CPU_ENVIRONMENT = {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "VLLM_CPU_OMP_THREADS_BIND": "auto",
                   "VLLM_USE_AOT_COMPILE": "0"}

# Settings for a GPU. The batch is what differs from `vllm serve`: an AsyncLLM started from
# code runs under vLLM's engine usage context, whose scheduler takes 2048 tokens and 128
# requests a step on any GPU, where `vllm serve` takes 8192 and 1024 on an H100 or H200 and
# vLLM's offline LLM class 16384 and 1024 (EngineArgs.get_batch_defaults, vLLM 0.26 to 0.33).
# A score is a prefill read of one token. With the embedded judge a SummEval prompt is 957
# tokens on average, and a GRPO group of 8 summaries of one article computes 1,859: the first
# prompt whole, the others past the prefix it cached (benchmarks/common.py, 64 groups). A
# 64-item call's 14,870 tokens took 8 steps of 2048 and fit one of 16384, vLLM's own budget for
# prefill-heavy batches on large GPUs. vLLM lowers its offline budget to 8192 on an A100 and on
# GPUs under 70 GiB, for batches that mix prefill and decode (vLLM PR 17885); a score has no
# decode, so one budget serves all. 1024 requests, vLLM's own on large GPUs: reasoning mode
# decodes a call's rationales (up to 512 tokens each) together where 128 queued them, and CUDA
# graphs are captured for batches up to 512 tokens (2 x 128 = 256 before). Not measured on a
# GPU yet: benchmarks/gpu_check.py measures both against `vllm serve` on the same GPU.
# Left to vLLM, each already right for scoring: blocks of 16 tokens (under the 32 set on CPU;
# attention backends that need others pick their own); compiled graphs and CUDA graphs, which
# serve the decode steps of reasoning mode and written steps (a prefill step over 512 tokens
# runs compiled, without a graph); 0.9 of a GPU the server owns, as `vllm serve` takes
# (--gpu-memory-utilization or --kv-cache-memory-bytes share one); the number format `auto`.
GPU_DEFAULTS = {"max_num_batched_tokens": 16384, "max_num_seqs": 1024}
# vLLM's auto keeps a 16-bit checkpoint's format and computes a float32 one (the embedded judge)
# in bfloat16 on a GPU with native bfloat16 (compute capability 8.0 or later), float16 before:
# bfloat16 moved rewards from float32's by 0.005 to 0.008 on average on CPU (RESULTS, 11 and 12).
GPU_DTYPE_REASON = ("vLLM's default (auto) on a GPU: the checkpoint's own format, a float32 checkpoint in "
                    "bfloat16 where the GPU computes it (compute capability 8.0 or later), float16 before")

# The reward model's engine (serve --reward-model: a sequence classifier beside the judge).
# A read is one prefill pooled at its last token: no decode, so its KV cache holds only the
# prompts being computed. On CPU 1 GiB holds a max-length chat of 8192 tokens of an 8B Llama
# (128 KiB per token), so vLLM starts it; the judge keeps its 2 GiB.
CLASSIFIER_CPU_KV_CACHE_BYTES = 1024**3
# On a GPU the engines share the card: the reward model (and a process reward model, each with
# its own flag) takes this share of the memory the judge would have had
# (--gpu-memory-utilization, else vLLM's 0.9), the judge the rest. An 8B
# reward model's bfloat16 weights are 16 GiB, under 0.3 x 0.9 of an 80 GB card (21.6 GiB),
# its prefill-only reads need little KV; the judge keeps the larger share for its prefix cache
# and reasoning mode's decode. Not measured on a GPU yet. Alone (no judge) it takes all of it.
REWARD_MODEL_MEMORY_FRACTION = 0.3
VLLM_GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default share of a GPU
# The judge's engine flags the reward model's engine takes too: the number format and how it
# runs. Flags that name or size one checkpoint (--max-model-len, --quantization, --tokenizer,
# ...) stay the judge's.
CLASSIFIER_SHARED_FLAGS = ("dtype", "enforce_eager", "trust_remote_code", "compilation_config")


def split_memory(engine_args: dict[str, Any], platform: str, shares: Mapping[str, float], judge: bool
                 ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The judge's engine arguments, and those of each engine beside it (by the flag that sets
    its share), from the user's flags (engine_args). On a GPU each takes its share of the memory
    the judge would have had and the judge keeps the rest, so together they take what the judge
    alone would (without a judge they divide it by their shares); on CPU each gets a small KV
    cache of its own. They take CLASSIFIER_SHARED_FLAGS. Shares that leave the judge nothing:
    ValueError naming their flags."""
    total = sum(shares.values())
    if judge and total >= 1:
        named = " + ".join(f"{flag} {fraction:g}" for flag, fraction in shares.items())
        raise ValueError(f"{named} = {total:g}: the engines beside the judge must leave it a share of the memory; "
                         "lower one")
    judge_args = dict(engine_args)
    shared = {name: engine_args[name] for name in CLASSIFIER_SHARED_FLAGS if name in engine_args}
    engines = {flag: dict(shared) for flag in shares}
    if platform == GPU:
        share = engine_args.get("gpu_memory_utilization", VLLM_GPU_MEMORY_UTILIZATION)
        for flag, fraction in shares.items():
            engines[flag]["gpu_memory_utilization"] = share * fraction if judge else share * fraction / total
        if judge and shares and "kv_cache_memory_bytes" not in engine_args:
            judge_args["gpu_memory_utilization"] = share * (1 - total)
    elif platform == CPU:
        for own in engines.values():
            own["kv_cache_memory_bytes"] = CLASSIFIER_CPU_KV_CACHE_BYTES
    return judge_args, engines


def split_here(engine_args: dict[str, Any], shares: Mapping[str, float], judge: bool
               ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """split_memory on the platform this process runs on."""
    from geval_server.engine.vllm_engine import platform  # vllm_engine imports this module

    return split_memory(engine_args, platform(), shares, judge=judge)


# What `serve --help` adds to a flag's help for the defaults above.
DEFAULTS_HELP = {
    "gpu_memory_utilization": f"vLLM's on GPU; none on CPU, where --kv-cache-memory-bytes {CPU_KV_CACHE_BYTES} "
                              "applies unless this is given",
    **{dest: str(value) for dest, value in ENGINE_DEFAULTS.items()},
    **{dest: f"{value} on CPU" for dest, value in CPU_DEFAULTS.items()},
    **{dest: f"{value} on GPU" for dest, value in GPU_DEFAULTS.items()},
    "dtype": f"{CPU_DTYPE_HELP}; on a GPU vLLM's auto (bfloat16 for the embedded judge)",
}


def defaults_line() -> str:
    """Our defaults as the flags that would set them, per platform, for `serve --help`."""

    def flags(settings: dict[str, Any]) -> str:
        return " ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in settings.items())

    return (f"everywhere {flags(ENGINE_DEFAULTS)}; on a GPU {flags(GPU_DEFAULTS)}; on a CPU {flags(CPU_DEFAULTS)} "
            f"--kv-cache-memory-bytes {CPU_KV_CACHE_BYTES} and the processor's --dtype (bfloat16 or float32)")


@dataclass
class EngineDefaults:
    """The engine arguments for one platform, with the user's given ones over ours."""

    settings: dict[str, Any]  # AsyncEngineArgs fields
    environment: dict[str, str] = field(default_factory=dict)  # vLLM environment variables ours set, unless set
    dtype_reason: str = "vLLM's default (auto): the checkpoint's own"


def engine_defaults(engine_args: dict[str, Any], platform: str,
                    choose_cpu_dtype: Callable[[], DtypeChoice] = cpu_dtype) -> EngineDefaults:
    """Our defaults for `platform` (CPU, GPU or OTHER) under the `AsyncEngineArgs` fields the user
    gave (engine_args), which always win."""
    chosen = EngineDefaults(dict(ENGINE_DEFAULTS))
    if platform == CPU:
        chosen.settings.update(CPU_DEFAULTS)
        chosen.environment = dict(CPU_ENVIRONMENT)
        if "dtype" not in engine_args:
            choice = choose_cpu_dtype()
            chosen.settings["dtype"], chosen.dtype_reason = choice.dtype, choice.reason
        if "gpu_memory_utilization" not in engine_args:
            chosen.settings["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
    elif platform == GPU:
        chosen.settings.update(GPU_DEFAULTS)
        chosen.dtype_reason = GPU_DTYPE_REASON
    if "dtype" in engine_args:
        chosen.dtype_reason = f"--dtype {engine_args['dtype']} given"
    chosen.settings.update(engine_args)
    return chosen


def classifier_defaults(engine_args: dict[str, Any], platform: str,
                        choose_cpu_dtype: Callable[[], DtypeChoice] = cpu_dtype) -> EngineDefaults:
    """The reward model's engine: the judge's defaults for the platform on vLLM's pooling runner
    (engine_args from split_memory)."""
    chosen = engine_defaults(engine_args, platform, choose_cpu_dtype)
    chosen.settings["runner"] = "pooling"
    return chosen
