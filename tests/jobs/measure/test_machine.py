"""jobs/measure/machine.py: which ISA a result ran on, from /proc/cpuinfo text (pure) and from this machine."""
from __future__ import annotations

from jobs.measure.hostfacts import machine_facts
from jobs.measure.machine import describe_cpuinfo, isa_level, one_line, summarise_load

AVX512 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9B14
flags\t\t: fpu vme sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni avx512_bf16
processor\t: 1
model name\t: AMD EPYC 9B14
flags\t\t: fpu vme sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f
"""
AVX2 = """model name\t: AMD EPYC 7B12
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2
"""
NEON = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm asimddp
CPU implementer\t: 0x41
"""


def test_an_avx512_and_an_avx2_machine_of_the_same_vendor_are_told_apart():
    big, small = describe_cpuinfo(AVX512), describe_cpuinfo(AVX2)
    assert isa_level(big["flags"]) == "avx512" and isa_level(small["flags"]) == "avx2"
    assert "avx512_vnni" in big["flags"] and "avx512f" not in small["flags"]
    assert big["model"] == "AMD EPYC 9B14"                     # the first processor's line only
    assert big["flags"].index("avx512f") < big["flags"].index("avx2")   # best first


def test_arm_features_give_neon_and_a_model_less_cpuinfo_is_not_an_error():
    arm = describe_cpuinfo(NEON)
    assert isa_level(arm["flags"], "aarch64") == "neon"
    assert "asimddp" in arm["flags"] and arm["model"] == ""
    assert isa_level([], "aarch64") == "neon" and isa_level([], "x86_64") == "scalar"


def test_load_summary_and_one_line():
    assert summarise_load([]) == {}
    load = summarise_load([0.5, 4.1, 2.0])
    assert load == {"min": 0.5, "max": 4.1, "mean": 2.2}
    line = one_line({"cpu": "X", "cpus": 2, "arch": "x86_64", "isa": "avx2", "flags": ["avx2", "fma"],
                     "kernel": "6.1.0", "compiler": "gcc 12.2"}, load)
    assert line.startswith("X, 2 cpus, x86_64, AVX2 (avx2 fma), Linux 6.1.0, gcc 12.2; 1-min load 0.5-4.1")
    assert one_line({}) == ""


def test_this_machine_is_described_with_what_its_cpu_really_offers():
    facts = machine_facts()
    flags = open("/proc/cpuinfo").read().split()
    assert facts["cpus"] >= 1 and facts["kernel"]
    assert (facts["isa"] == "avx512") == ("avx512f" in flags)
    if "avx2" in flags and "avx512f" not in flags:
        assert facts["isa"] == "avx2"
