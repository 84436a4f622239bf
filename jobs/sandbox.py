"""Every step that runs target code (build, checks, benchmark, an agent's quick build) runs here.

Adapter over bubblewrap (`bwrap`, Debian's `bubblewrap`). Inside a sandbox, target code sees:

* the system directories read-only (`/usr`, `/etc`, `/sys`, the `/lib*` and `/bin` links, `/opt`);
* its worktree at its own absolute path, writable for build and checks, read-only for the
  benchmark (so no benchmark process can leave state for the next one);
* the declared cache paths (`sandbox.caches` writable except in the benchmark, `sandbox.read_only`
  read-only), which must live under the operator's cache root, never anywhere else;
* a fresh, empty `$HOME` (same path as the runner's, a private tmpfs), `/tmp`, `/var/tmp` and `/dev/shm`;
* a new network namespace (no network, loopback included: no Redis, no App), a new PID namespace
  (only its own processes in `/proc`, so no other process's `/proc/*/environ`), new IPC and UTS
  namespaces, a user namespace with every capability dropped;
* an environment built from an allow-list, never the runner's own (no token, key or URL leaks in).

PID 1 of every sandbox is a 20-line init of ours (`INIT_SOURCE`, compiled once per machine with
`cc`): it runs the step, and when the step's main process exits it SIGKILLs every other process
of the namespace (a `setsid nohup … &` daemon included) and reaps them itself. Reaping them itself
is the point: the kernel's own teardown of a PID namespace does not charge the killed processes'
CPU time to anyone (measured here: a daemon's 0.7 s vanished from the rusage), while reaped
children's time adds up the tree to the runner's `wait4`, which is what `Completed.cpu_s` reports.
bubblewrap's own init, tini and dumb-init all leave the stragglers to the kernel.

Where bubblewrap cannot create namespaces, `check()` raises `SandboxUnavailable` naming the fix;
running without a sandbox is an explicit opt-out (`--no-sandbox` / `sandbox: {enabled: false}`)
that reports and PR bodies state.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_DIRS = ("/usr", "/etc", "/sys", "/opt")
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
BASE_ENV = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "TZ", "TERM",
            "CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAKEFLAGS", "SOURCE_DATE_EPOCH")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
INSTALL_HINT = ("install bubblewrap (Debian: apt-get install bubblewrap) and allow user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1, or run the container with "
                "--security-opt seccomp=unconfined / a userns-capable runtime)")


INIT_PATH = "/.autoresearch-init"
INIT_SOURCE = r"""
/* PID 1 of an autoresearch sandbox: run argv[1..], wait for it, then kill and reap every other
 * process of the PID namespace so that their CPU time is charged to the sandbox. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 2) return 127;
    pid_t child = fork();
    if (child < 0) { perror("autoresearch-init: fork"); return 127; }
    if (child == 0) { execvp(argv[1], argv + 1); perror("autoresearch-init: exec"); _exit(127); }
    int status = 0, rc = 127;
    for (;;) {
        pid_t p = waitpid(-1, &status, 0);
        if (p == child) { rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); break; }
        if (p < 0 && errno != EINTR) break;
    }
    kill(-1, SIGKILL);
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {}
    return rc;
}
"""


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create the namespaces; the message names the fix."""


@dataclass(frozen=True)
class Mount:
    path: str
    writable: bool = False


@dataclass(frozen=True)
class Policy:
    """What one sandboxed step may see. `tree` is bound at its own path; `hidden` paths (the
    App's key file, wherever an operator put it) are masked even inside the system directories."""

    tree: Path
    tree_writable: bool = True
    mounts: tuple[Mount, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    home: str = "/home/sandbox"
    hidden: tuple[str, ...] = ()


_HIDDEN: set[str] = set()


def hide(*paths: str | Path) -> None:
    """Mask these files or folders in every sandbox of this process (called by whoever holds a
    secret file, e.g. the App's settings with its private key's path)."""
    _HIDDEN.update(os.path.realpath(p) for p in paths if p)


def hidden() -> tuple[str, ...]:
    return tuple(sorted(_HIDDEN))


@dataclass
class Completed:
    returncode: int | None          # None: killed at the time limit
    output: str
    wall_s: float
    cpu_s: float                    # user + system CPU of the whole process tree
    sandboxed: bool


def environment(passthrough: tuple[str, ...] | list[str], extra: dict[str, str] | None = None,
                source: dict[str, str] | None = None, home: str = "/home/sandbox") -> dict[str, str]:
    """The environment a step gets: the harmless base names and `passthrough` names copied from
    `source` (the runner's environment), then `extra` (e.g. AUTORESEARCH_SEED). Pure."""
    from .secrets import target_may_see
    source = os.environ if source is None else source
    env = {name: source[name] for name in (*BASE_ENV, *passthrough)
           if name in source and target_may_see(name)}
    env.setdefault("PATH", DEFAULT_PATH)
    env.update(HOME=home, TMPDIR="/tmp", USER="sandbox", LOGNAME="sandbox")
    env.update(extra or {})
    return env


def bwrap_argv(policy: Policy, command: list[str], *, existing: set[str], userns: bool, init: str) -> list[str]:
    """The bubblewrap command line for `command` under `policy`, with `init` (the compiled
    INIT_SOURCE) as PID 1. Pure: `existing` says which system paths exist on this machine."""
    argv = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--as-pid-1", "--unshare-net",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL"]
    if userns:
        argv += ["--unshare-user", "--disable-userns"]
    for d in SYSTEM_DIRS:
        if d in existing:
            argv += ["--ro-bind", d, d]
    for link in SYSTEM_LINKS:
        target = existing_link(link, existing)
        if target:
            argv += ["--symlink", target, link]
        elif link in existing:
            argv += ["--ro-bind", link, link]
    argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--dir", "/var/tmp",
             "--tmpfs", policy.home]
    dirs = [h for h in policy.hidden if h.endswith("/")]
    for path in policy.hidden:      # after the system binds, so the mask lies on top of them
        if any(path != d and path.startswith(d) for d in dirs):
            continue                # inside a folder that is masked as a whole
        if any(path == d or path.startswith(d + "/") for d in SYSTEM_DIRS if d in existing):
            argv += ["--tmpfs", path] if path.endswith("/") else ["--ro-bind", "/dev/null", path]
    for m in policy.mounts:
        argv += ["--bind" if m.writable else "--ro-bind", m.path, m.path]
    tree = str(policy.tree)
    argv += ["--bind" if policy.tree_writable else "--ro-bind", tree, tree, "--chdir", tree,
             "--ro-bind", init, INIT_PATH, "--clearenv"]
    for name, value in sorted(policy.env.items()):
        argv += ["--setenv", name, value]
    return argv + ["--", INIT_PATH, *command]


def existing_link(path: str, existing: set[str]) -> str | None:
    """`existing` holds `path -> target` entries as 'path=>target' for symlinked system paths."""
    prefix = path + "=>"
    return next((e[len(prefix):] for e in existing if e.startswith(prefix)), None)


def _system_paths() -> set[str]:
    found = set()
    for p in (*SYSTEM_DIRS, *SYSTEM_LINKS):
        if os.path.islink(p):
            found.add(f"{p}=>{os.readlink(p)}")
        elif os.path.isdir(p):
            found.add(p)
    return found


def cache_root() -> Path:
    """Where the operator keeps what sandboxes may be given (declared caches, models) and where
    the init binary is built: $AUTORESEARCH_CACHE_ROOT, else $XDG_CACHE_HOME/autoresearch."""
    root = os.environ.get("AUTORESEARCH_CACHE_ROOT")
    if root:
        return Path(root).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "autoresearch"


@functools.lru_cache(maxsize=1)
def init_binary() -> str:
    """Compile INIT_SOURCE once per machine (keyed by its hash) and return the binary's path."""
    digest = hashlib.sha256(INIT_SOURCE.encode()).hexdigest()[:16]
    out = cache_root() / "sandbox" / f"init-{digest}"
    if out.is_file():
        return str(out)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SandboxUnavailable("the sandbox needs a C compiler (cc) once, to build its init; "
                                 "install gcc, or run with --no-sandbox")
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".c")
    src.write_text(INIT_SOURCE)
    tmp = out.with_name(out.name + f".{os.getpid()}")
    proc = subprocess.run([cc, "-O2", "-static", "-o", str(tmp), str(src)], capture_output=True, text=True)
    if proc.returncode != 0:      # no static libc here: a dynamic binary sees /usr/lib all the same
        proc = subprocess.run([cc, "-O2", "-o", str(tmp), str(src)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SandboxUnavailable(f"could not compile the sandbox init with {cc}: {proc.stderr.strip()[-500:]}")
    os.replace(tmp, out)
    return str(out)


@functools.lru_cache(maxsize=1)
def check() -> bool:
    """Whether bubblewrap works here; returns True for user-namespace mode, False for the root
    fallback (no user namespace, capabilities dropped). Raises SandboxUnavailable otherwise."""
    exe = shutil.which("bwrap")
    if exe is None:
        raise SandboxUnavailable(f"bubblewrap (bwrap) is not installed; {INSTALL_HINT}; or run with "
                                 "--no-sandbox / `sandbox: {enabled: false}` (the report then says so)")
    errors = []
    for userns in (True, False):
        if not userns and os.geteuid() != 0:
            break
        argv = bwrap_argv(Policy(tree=Path("/tmp")), ["true"], existing=_system_paths(), userns=userns,
                          init=init_binary())
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if proc.returncode == 0:
            return userns
        errors.append(proc.stderr.strip() or f"exit {proc.returncode}")
    raise SandboxUnavailable(f"bubblewrap cannot create its namespaces here ({'; '.join(errors)}); "
                             f"{INSTALL_HINT}; or run with --no-sandbox / `sandbox: {{enabled: false}}` "
                             "(the report then says so)")


def run(command: str, cwd: Path, timeout: float, *, policy: Policy | None,
        env: dict[str, str] | None = None, cpus: set[int] | None = None) -> Completed:
    """Run `bash -c command` (in the sandbox when `policy` is given, else in a process group of
    its own with `env`), kill the whole tree at `timeout`, and measure its wall and CPU time."""
    if policy is not None:
        argv = bwrap_argv(policy, ["bash", "-c", command], existing=_system_paths(), userns=check(),
                          init=init_binary())
        popen_env = {"PATH": os.environ.get("PATH", DEFAULT_PATH)}
    else:
        argv, popen_env = ["bash", "-c", command], env
    preexec = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=popen_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=preexec)
    chunks: list[bytes] = []

    def read() -> None:
        with contextlib.suppress(OSError, ValueError):      # closed under us: a daemon kept the pipe
            chunks.extend(iter(lambda: proc.stdout.read(65536), b""))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        _kill_group(proc.pid)
    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)   # the tree's rusage: every descendant was reaped below us
    except BaseException:
        # Interrupted (Ctrl-C, a worker being stopped): the step's process group would otherwise
        # outlive us, since it runs in a session of its own.
        _kill_group(proc.pid)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(proc.pid, 0)
        proc.returncode = -9
        raise
    finally:
        timer.cancel()
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if policy is None:
        _kill_group(proc.pid)        # unsandboxed: a daemon that left the group is beyond reach
    reader.join(timeout=5)
    proc.stdout.close()
    output = b"".join(chunks).decode("utf-8", errors="replace")
    code = None if timed_out.is_set() else proc.returncode
    return Completed(code, output, wall, usage.ru_utime + usage.ru_stime, policy is not None)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):   # the group may already be gone
        os.killpg(pgid, signal.SIGKILL)
