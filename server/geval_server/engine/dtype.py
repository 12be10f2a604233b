"""The number format the judge computes in on a CPU, and why: bfloat16 where the
processor computes it natively, float32 elsewhere.

bfloat16 halves the bytes every matmul reads, but only a processor with bfloat16
instructions turns that into speed: on an AMD EPYC with `avx512_bf16` the same 64
SummEval items scored at 1.55x float32's items/s, while on an Intel Xeon without it
(bfloat16 converted in software) they ran 4x slower (benchmarks/RESULTS.md, number formats). So the choice is read
from the processor's flags; `--dtype` given on the command line always decides.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

# /proc/cpuinfo's line of flags (x86: `flags`, aarch64: `Features`) -> the flags that
# mean native bfloat16 arithmetic: AVX-512 BF16 dot products or AMX tiles on x86, the
# Armv8.6 BF16 instructions on aarch64.
NATIVE_BF16_FLAGS = {"flags": ("avx512_bf16", "amx_bf16"), "Features": ("bf16",)}
CPUINFO = pathlib.Path("/proc/cpuinfo")

# --dtype's help, as `serve --help` shows our default beside vLLM's.
CPU_DTYPE_HELP = ("bfloat16 on a CPU that computes it natively (avx512_bf16 or amx_bf16; bf16 on aarch64), "
                  "float32 on other CPUs")


@dataclass(frozen=True)
class DtypeChoice:
    dtype: str  # as --dtype spells it
    reason: str  # one line, for the start-up log and GetInfo


def native_bf16_flags(cpuinfo: str) -> list[str]:
    """The flags in a /proc/cpuinfo text that say the processor computes bfloat16 natively."""
    found: set[str] = set()
    for line in cpuinfo.splitlines():
        key, colon, value = line.partition(":")
        wanted = NATIVE_BF16_FLAGS.get(key.strip()) if colon else None
        if wanted:
            found.update(flag for flag in value.split() if flag in wanted)
    return sorted(found)


def choose_cpu_dtype(cpuinfo: str) -> DtypeChoice:
    """bfloat16 where `cpuinfo` (the text of /proc/cpuinfo) lists a native bfloat16 flag, else float32."""
    flags = native_bf16_flags(cpuinfo)
    if flags:
        return DtypeChoice("bfloat16", f"the processor computes bfloat16 natively ({', '.join(flags)})")
    return DtypeChoice("float32", "the processor has no native bfloat16 (no avx512_bf16, amx_bf16 or aarch64 bf16 "
                                  "flag), where bfloat16 is converted in software and runs slower")


def cpu_dtype(cpuinfo: pathlib.Path = CPUINFO) -> DtypeChoice:
    """The choice for this machine's processor; float32 where its flags cannot be read."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError as error:
        return DtypeChoice("float32", f"the processor's flags could not be read ({error})")
    return choose_cpu_dtype(text)

