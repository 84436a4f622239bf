"""Where a measurement ran: the CPU, the instruction sets it offers, the kernel, the compiler and
the host's load, recorded beside every result.

A number measured on an AVX-512 machine says little about an AVX2 one (runtime-dispatched kernels
take other paths, and an `-mavx512f` binary does not even start there), and a busy host's load
explains a wide interval. Reports used to name only the CPU model ("AMD EPYC (2 cpus)"), which is
the same string on both kinds of machine here.

Pure: text and numbers in, data out; `jobs.measure.hostfacts` reads this machine.
"""
from __future__ import annotations

from typing import Mapping

from jobs.contract.machinefacts import MachineFacts


# The flags that decide which SIMD path a runtime-dispatched kernel takes, best first per family.
X86_FLAGS = ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16", "avx512vbmi",
             "amx_tile", "amx_int8", "amx_bf16", "avx_vnni", "avx2", "fma", "f16c", "avx", "sse4_2",
             "sse4_1", "ssse3")
ARM_FLAGS = ("sve2", "sve", "i8mm", "bf16", "asimddp", "asimdhp", "fphp", "asimd")


def describe_cpuinfo(text: str) -> dict[str, object]:
    """The CPU model and the SIMD flags that matter, from the text of /proc/cpuinfo. Pure."""
    model, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if not model and key in ("model name", "cpu model", "hardware"):
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    wanted = X86_FLAGS if any(f in flags for f in ("sse2", "avx", "avx2")) else ARM_FLAGS
    return {"model": model, "flags": [f for f in wanted if f in flags]}


def isa_level(flags: list[str] | tuple[str, ...], machine: str = "") -> str:
    """One word for the widest vector ISA: avx512 | avx2 | avx | sse | sve | neon | scalar. Pure.
    Results folders and report headlines end in it, so an AVX2 and an AVX-512 run cannot be mixed up."""
    have = set(flags)
    if "avx512f" in have:
        return "avx512"
    if "avx2" in have:
        return "avx2"
    if "avx" in have:
        return "avx"
    if have & {"sse4_2", "sse4_1", "ssse3"}:
        return "sse"
    if "sve" in have:
        return "sve"
    if "asimd" in have or machine in ("aarch64", "arm64"):
        return "neon"
    return "scalar"


def summarise_load(ones: list[float]) -> dict[str, float]:
    """The 1-minute load average over a run, from the samples taken as it went. Pure."""
    if not ones:
        return {}
    return {"min": round(min(ones), 2), "max": round(max(ones), 2), "mean": round(sum(ones) / len(ones), 2)}


def one_line(facts: MachineFacts | Mapping[str, object] | None, load: dict[str, float] | None = None) -> str:
    """'AMD EPYC 7B13, 2 cpus, x86_64, AVX512 (avx512f avx512bw …), Linux 6.1, gcc 12.2; load 0.5-4.1'. Pure.
    `facts` is a platform's `MachineFacts`, or their JSON form (`jobs.measure.hostfacts.machine_facts`)."""
    if isinstance(facts, Mapping):
        facts = MachineFacts.from_json(facts)
    if facts is None or not facts.to_json():
        return ""
    flags = " ".join(facts.flags)
    parts = [str(facts.cpu), f"{'?' if facts.cpus is None else facts.cpus} cpus", str(facts.arch),
             f"{str('?' if facts.isa is None else facts.isa).upper()}" + (f" ({flags})" if flags else "")]
    if facts.kernel:
        parts.append(f"Linux {facts.kernel}")
    if facts.compiler:
        parts.append(str(facts.compiler))
    text = ", ".join(p for p in parts if p)
    if load:
        text += f"; 1-min load {load['min']:.1f}-{load['max']:.1f} (mean {load['mean']:.1f})"
    return text
