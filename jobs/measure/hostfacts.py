"""This machine's facts for jobs/measure/machine.py: /proc/cpuinfo, the kernel, the compiler, the load."""
from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
from pathlib import Path

from jobs.measure.machine import describe_cpuinfo, isa_level


def compiler_version(cc: str | None = None) -> str:
    """The first line of `cc --version` (the compiler the target's build most likely used)."""
    exe = cc or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not exe:
        return ""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.splitlines()[0].strip() if out else ""


def load_now() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, object]:
    """The model and SIMD flags of /proc/cpuinfo, read once per process (they do not change)."""
    try:
        return describe_cpuinfo(Path("/proc/cpuinfo").read_text(errors="replace"))
    except OSError:
        return {"model": "", "flags": []}


def cpu_model() -> str:
    """'<model> (N cpus, arch)', the label every record and report names its machine by."""
    model = _cpuinfo()["model"]
    if model:
        return f"{model} ({os.cpu_count()} cpus, {platform.machine()})"
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cpus)"


def machine_facts() -> dict[str, object]:
    """This machine, as summary.json and pr.md record it: cpu, cpus, arch, isa, flags, kernel, compiler."""
    cpu = _cpuinfo()
    flags = list(cpu["flags"])  # type: ignore[arg-type]
    return {"cpu": cpu["model"] or platform.processor() or platform.machine(), "cpus": os.cpu_count() or 0,
            "arch": platform.machine(), "isa": isa_level(flags, platform.machine()), "flags": flags,
            "kernel": platform.release(), "compiler": compiler_version()}
