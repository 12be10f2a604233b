"""The CPU number format: bfloat16 only where /proc/cpuinfo shows native bfloat16
arithmetic, float32 elsewhere; --dtype given always decides; and the format is part
of the judge a reward's content hash names."""

from __future__ import annotations

import pytest
from geval_server.engine.dtype import choose_cpu_dtype, cpu_dtype, native_bf16_flags
from geval_server.engine.protocol import judge_identity

from tests.unit.fakes import fake_judge

# Abridged /proc/cpuinfo texts (two processors each where the kernel lists them per core).
EPYC_WITHOUT_BF16 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu vme de pse tsc msr fma avx avx2 bmi1 bmi2 sha_ni
bugs\t\t: sysret_ss_attrs

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu vme de pse tsc msr fma avx avx2 bmi1 bmi2 sha_ni
"""
EPYC_GENOA = """processor\t: 0
model name\t: AMD EPYC 9654 96-Core Processor
flags\t\t: fpu avx avx2 avx512f avx512dq avx512_bf16 avx512_vnni avx512_bitalg
"""
# Skylake-class Xeon: AVX-512, but no bfloat16 instructions.
XEON_AVX512_ONLY = """processor\t: 0
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu avx avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni
"""
XEON_SAPPHIRE_RAPIDS = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8
"""
# A hypervisor that passes AMX through but not AVX512_BF16 still computes bfloat16 natively.
AMX_ONLY = "flags\t\t: fpu avx2 amx_tile amx_bf16\n"
GRAVITON3 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid sve bf16 i8mm svebf16
CPU implementer\t: 0x41
"""
GRAVITON2 = """processor\t: 0
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
"""


@pytest.mark.parametrize(
    ("cpuinfo", "dtype", "flags"),
    [
        (EPYC_WITHOUT_BF16, "float32", []),
        (XEON_AVX512_ONLY, "float32", []),
        (GRAVITON2, "float32", []),
        ("", "float32", []),
        (EPYC_GENOA, "bfloat16", ["avx512_bf16"]),
        (XEON_SAPPHIRE_RAPIDS, "bfloat16", ["amx_bf16", "avx512_bf16"]),
        (AMX_ONLY, "bfloat16", ["amx_bf16"]),
        (GRAVITON3, "bfloat16", ["bf16"]),
    ],
)
def test_bfloat16_only_where_the_processor_computes_it(cpuinfo, dtype, flags):
    choice = choose_cpu_dtype(cpuinfo)
    assert native_bf16_flags(cpuinfo) == flags
    assert choice.dtype == dtype
    assert all(flag in choice.reason for flag in flags)


def test_flags_count_only_on_their_own_line():
    # `bf16` is an aarch64 feature; on an x86 flags line, or in a model name, it means nothing.
    assert native_bf16_flags("flags\t\t: fpu bf16\nmodel name\t: avx512_bf16 amx_bf16\n") == []
    assert native_bf16_flags("Features\t: fp asimd svebf16\n") == []


def test_unreadable_cpuinfo_is_float32(tmp_path):
    choice = cpu_dtype(tmp_path / "missing")
    assert choice.dtype == "float32" and "could not be read" in choice.reason
    (tmp_path / "cpuinfo").write_text(EPYC_GENOA)
    assert cpu_dtype(tmp_path / "cpuinfo").dtype == "bfloat16"


def test_the_number_format_is_part_of_every_content_hash(monkeypatch):
    from tests.unit import fakes

    judge32, _, _ = fake_judge(rubrics=("summeval-coherence",))
    monkeypatch.setattr(fakes.RecordingEngine, "dtype", "bfloat16")
    judge16, _, _ = fake_judge(rubrics=("summeval-coherence",))
    hashes32 = {name: scorer.content_hash for name, scorer in judge32.scorers.items()}
    hashes16 = {name: scorer.content_hash for name, scorer in judge16.scorers.items()}
    assert hashes32.keys() == hashes16.keys()
    assert all(hashes32[name] != hashes16[name] for name in hashes32)
    assert judge_identity("m", "float32") != judge_identity("m", "bfloat16")
