"""Each platform gets its own engine defaults and nothing of another's: a GPU engine gets the GPU
batch and no CPU environment variable, KV size, block size or CPU number format; flags given win."""

from __future__ import annotations

import os

import pytest
from geval_server.engine.defaults import (
    CPU,
    CPU_DEFAULTS,
    CPU_ENVIRONMENT,
    CPU_KV_CACHE_BYTES,
    DEFAULTS_HELP,
    ENGINE_DEFAULTS,
    GPU,
    GPU_DEFAULTS,
    GPU_DTYPE_REASON,
    OTHER,
    defaults_line,
    engine_defaults,
)
from geval_server.engine.dtype import DtypeChoice
from geval_server.engine.vllm_engine import VllmEngine


def no_cpu_choice() -> DtypeChoice:
    raise AssertionError("the CPU's number format was chosen off a CPU")


def native_bf16() -> DtypeChoice:
    return DtypeChoice("bfloat16", "native (test)")


def test_a_gpu_gets_the_gpu_batch_and_nothing_of_the_cpus():
    chosen = engine_defaults({}, GPU, no_cpu_choice)
    assert chosen.settings == {**ENGINE_DEFAULTS, **GPU_DEFAULTS}
    assert chosen.environment == {}
    assert not set(chosen.settings) & {*CPU_DEFAULTS, "kv_cache_memory_bytes", "dtype"}
    assert chosen.dtype_reason == GPU_DTYPE_REASON


def test_a_cpu_gets_the_cpu_settings_and_nothing_of_the_gpus():
    chosen = engine_defaults({}, CPU, native_bf16)
    assert chosen.settings == {**ENGINE_DEFAULTS, **CPU_DEFAULTS, "dtype": "bfloat16",
                               "kv_cache_memory_bytes": CPU_KV_CACHE_BYTES}
    assert chosen.environment == CPU_ENVIRONMENT and chosen.dtype_reason == "native (test)"
    assert not set(chosen.settings) & set(GPU_DEFAULTS)


def test_another_platform_gets_vllms_own_but_prefix_caching():
    chosen = engine_defaults({}, OTHER, no_cpu_choice)
    assert (chosen.settings, chosen.environment) == (ENGINE_DEFAULTS, {})


@pytest.mark.parametrize("platform", [CPU, GPU])
def test_flags_given_win_on_every_platform(platform):
    given = {"max_num_batched_tokens": 4096, "block_size": 64, "dtype": "float32", "enable_prefix_caching": False}
    chosen = engine_defaults(given, platform, no_cpu_choice)
    assert {k: chosen.settings[k] for k in given} == given
    assert chosen.dtype_reason == "--dtype float32 given"


def test_a_share_of_memory_given_on_cpu_replaces_the_fixed_kv_size():
    chosen = engine_defaults({"gpu_memory_utilization": 0.5}, CPU, native_bf16)
    assert "kv_cache_memory_bytes" not in chosen.settings


def test_a_gpu_engine_sets_no_cpu_variable_and_needs_no_vllm_to_choose(monkeypatch):
    for name in CPU_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    engine = VllmEngine("unused", {}, platform_name=GPU)
    assert engine.settings == {**ENGINE_DEFAULTS, **GPU_DEFAULTS} and engine.environment == {}
    assert not set(CPU_ENVIRONMENT) & set(os.environ)


def test_help_names_every_default_with_its_platform():
    for dest, value in GPU_DEFAULTS.items():
        assert DEFAULTS_HELP[dest] == f"{value} on GPU"
    for dest, value in CPU_DEFAULTS.items():
        assert DEFAULTS_HELP[dest] == f"{value} on CPU"
    assert "on a GPU" in DEFAULTS_HELP["dtype"] and str(CPU_KV_CACHE_BYTES) in DEFAULTS_HELP["gpu_memory_utilization"]


def test_the_first_help_page_names_the_gpu_defaults_as_flags():
    assert "on a GPU --max-num-batched-tokens 16384 --max-num-seqs 1024;" in defaults_line()
    assert defaults_line().startswith("everywhere --enable-prefix-caching;")
