"""What one sandboxed step may consume, decided by the operator (never by a repository).

| variable | default | bounds |
|---|---|---|
| AUTORESEARCH_LIMIT_MEMORY_MIB | 0 = the machine's RAM | address space of each process of a step (RLIMIT_AS) |
| AUTORESEARCH_LIMIT_PROCESSES | 4096 | processes of the sandbox's uid (RLIMIT_NPROC; per uid, see below) |
| AUTORESEARCH_LIMIT_FILE_MIB | 8192 | the largest file a step may write (RLIMIT_FSIZE) |
| AUTORESEARCH_LIMIT_TMPFS_MIB | 1024 | each of the sandbox's /tmp, /dev/shm and $HOME (bwrap `--size`) |
| AUTORESEARCH_LIMIT_OUTPUT_MIB | 16 | what the runner reads of one step's output; more fails the step |
| AUTORESEARCH_LIMIT_METRIC_LINES | 10000 | METRIC/DIGEST lines parsed per benchmark process; more fails it |
| AUTORESEARCH_SANDBOX_UIDS | 3000000-3065535 | the uids (and gids) a root worker's target code runs as: one per repository (`jobs.guard.tenants`) |

The rlimits are set by util-linux's `prlimit` in front of bubblewrap (`Limits.wrap`), so every
process of the step inherits them. Core files are off (RLIMIT_CORE 0). RLIMIT_NPROC counts every
process of a uid on the machine: a root worker gives each repository a uid of its own from the range above,
so the limit is per repository (the kernel exempts uid 0 from it, one more reason target code never runs as
root); a worker that is not root has one uid to give, so its sandboxes share the limit (ARCHITECTURE.md,
"Tenants"). Memory is an
rlimit per process, not per step: a model file the benchmark maps counts too, hence the default of
the machine's RAM (no one process can take more than there is). Docker here offers cgroup v1 only,
which a worker cannot delegate; the tmpfs sizes bound what a step can park in memory besides.

Files a target could have written are read through `jobs/guard/safefs.py`: a regular file only (never a
FIFO, a device such as /dev/zero, or a link at any path component), and never more than its cap.
"""
from __future__ import annotations

import os
import resource
import shutil
from dataclasses import asdict, dataclass
from typing import Mapping

MIB = 1024 * 1024
ENV_PREFIX = "AUTORESEARCH_LIMIT_"


class LimitError(ValueError):
    """An operator's limit setting is not usable; the message names the variable and the fix."""


@dataclass(frozen=True)
class Limits:
    memory_mib: int = 0                 # 0: the physical memory of the machine the step runs on
    processes: int = 4096
    file_mib: int = 8192
    tmpfs_mib: int = 1024
    output_mib: int = 16
    metric_lines: int = 10000
    sandbox_uid: int = 65534            # the uid of this run's repository (jobs.guard.tenants), set per run
    uid_first: int = 3000000            # AUTORESEARCH_SANDBOX_UIDS: the range repositories' uids come from
    uid_last: int = 3065535

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Limits":
        env = os.environ if env is None else env
        if env.get("AUTORESEARCH_SANDBOX_UID", "").strip():
            raise LimitError("AUTORESEARCH_SANDBOX_UID is replaced by AUTORESEARCH_SANDBOX_UIDS, a range "
                             "(one uid per repository, so no two share a process limit); fix: e.g. "
                             "AUTORESEARCH_SANDBOX_UIDS=3000000-3065535")
        values = _uid_range(env.get("AUTORESEARCH_SANDBOX_UIDS", "").strip())
        for name, default in asdict(cls()).items():
            if name in ("sandbox_uid", "uid_first", "uid_last"):
                continue
            var = ENV_PREFIX + name.upper()
            raw = env.get(var, "").strip()
            if not raw:
                values[name] = default
                continue
            try:
                values[name] = int(raw)
            except ValueError:
                raise LimitError(f"{var}={raw!r}: not a whole number; fix: e.g. {var}={default}") from None
            if values[name] < 0 or (values[name] == 0 and name != "memory_mib"):
                raise LimitError(f"{var}={raw}: must be above 0; fix: e.g. {var}={default}")
        return cls(**values)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, int] | None) -> "Limits":
        known = asdict(cls())
        return cls(**{k: int(v) for k, v in (data or {}).items() if k in known})

    def rlimits(self) -> list[tuple[str, int, int]]:
        """(prlimit option, resource, limit) applied to a step's first process, inherited by all of it."""
        memory = self.memory_mib * MIB or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return [("--as", resource.RLIMIT_AS, memory), ("--nproc", resource.RLIMIT_NPROC, self.processes),
                ("--fsize", resource.RLIMIT_FSIZE, self.file_mib * MIB), ("--core", resource.RLIMIT_CORE, 0)]

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run under these limits, through util-linux's `prlimit` (an exec, not a
        `preexec_fn`: Python code between fork and exec is unsafe in a threaded runner). A limit is
        never raised above the hard limit this process already has."""
        exe = shutil.which("prlimit")
        if exe is None:
            raise LimitError("the sandbox's limits need prlimit (Debian: util-linux); install it")
        options = []
        for option, res, value in self.rlimits():
            _, hard = resource.getrlimit(res)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            options.append(f"{option}={value}:{value}")
        return [exe, *options, "--", *argv]


def _uid_range(raw: str) -> dict[str, int]:
    """AUTORESEARCH_SANDBOX_UIDS=`first-last` -> the Limits fields (empty: the defaults)."""
    if not raw:
        return {}
    first, sep, last = raw.partition("-")
    try:
        low, high = int(first), int(last)
    except ValueError:
        low = high = -1
    if not sep or low < 1000 or high < low or high >= 2**32 - 2:
        raise LimitError(f"AUTORESEARCH_SANDBOX_UIDS={raw!r}: not a range of unprivileged uids `first-last` "
                         "(first at least 1000, last below 4294967294, e.g. 3000000-3065535)")
    return {"uid_first": low, "uid_last": high}
