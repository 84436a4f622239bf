"""Every step that runs target code (build, checks, benchmark, an agent's quick build) runs here.

Adapter over bubblewrap (`bwrap`, Debian's `bubblewrap`). Inside a sandbox, target code sees:

* the system directories read-only (`/usr`, `/etc`, `/sys`, the `/lib*` and `/bin` links, `/opt`);
* its worktree at its own absolute path, writable for build and checks, read-only for the
  benchmark (so no benchmark process can leave state for the next one);
* the declared cache paths (`sandbox.caches` writable except in the benchmark, `sandbox.read_only`
  read-only), which must live under the operator's cache root, never anywhere else; a cache is
  seen at its declared path but backed by a folder of that repository's own namespace
  (`Mount.source`, see `jobs.measure.isolation.Isolation`), opened without following a link and bound
  from that descriptor (`--bind-fd`);
* a fresh, empty `$HOME` (same path as the runner's), `/tmp`, `/var/tmp` and `/dev/shm`, each a
  private tmpfs of at most `Limits.tmpfs_mib`;
* a new network namespace (no network, loopback included: no Redis, no App), a new PID namespace
  (only its own processes in `/proc`, so no other process's `/proc/*/environ`), new IPC and UTS
  namespaces, a user namespace with every capability dropped;
* an environment built from an allow-list, never the runner's own (no token, key or URL leaks in);
* rlimits on every process (`jobs.guard.limits`: address space, processes, file size, no core files), and
  its output read up to `Limits.output_mib` (more kills the step and says so, `Completed.overflow`);
* when the worker is root: no user namespace (its uid 0 would still own root's files); bubblewrap
  drops every capability but setuid/setgid/kill, which only the init keeps: the step's process
  drops to `Limits.sandbox_uid` (its repository's own, `jobs.guard.tenants`) before it runs, so target
  code is an unprivileged user (/etc/shadow unreadable, and masked besides) in a user namespace of
  its own (a user keyring of its own); a writable tree is made group-writable for that
  uid (`grant_tree`), its root dir sticky. (Where bubblewrap as root cannot work without a user
  namespace, e.g. without CAP_SYS_ADMIN, `check()` falls back to one: then only the masks hold.)

PID 1 of every sandbox is a small init of ours (`jobs.guard.sandboxinit`, kept in a sealed memfd and
verified by hash before every use, never on a path a build could replace): it runs the step, and
when the step's main process exits it SIGKILLs every other process of the namespace (a
`setsid nohup … &` daemon included) and reaps them itself. Reaping them itself
is the point: the kernel's own teardown of a PID namespace does not charge the killed processes'
CPU time to anyone (measured here: a daemon's 0.7 s vanished from the rusage), while reaped
children's time adds up the tree to the runner's `wait4`, which is what `Completed.cpu_s` reports.
bubblewrap's own init, tini and dumb-init all leave the stragglers to the kernel.

Where bubblewrap cannot create namespaces, `check()` raises `SandboxUnavailable` naming the fix;
running without a sandbox is the operator's explicit opt-out (`--no-sandbox`, or a repository's
`sandbox: {enabled: false}` where the operator allows it: `jobs.guard.operator`) that reports and PR
bodies state.
"""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import stat
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from jobs.guard import cachedirs
from jobs.guard.limits import MIB, Limits
from jobs.guard.sandboxinit import INIT_SOURCE, InitUnavailable, init_fd, init_sha256  # noqa: F401 (re-exported)

SYSTEM_DIRS = ("/usr", "/etc", "/sys", "/opt")
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
BASE_ENV = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "TZ", "TERM",
            "CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "MAKEFLAGS", "SOURCE_DATE_EPOCH")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
INSTALL_HINT = ("install bubblewrap (Debian: apt-get install bubblewrap) and allow user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1, or run the container with "
                "--security-opt seccomp=unconfined / a userns-capable runtime)")


OPT_OUT = ("or, where the operator trusts the target, run it without a sandbox: --no-sandbox on the CLI, "
           "AUTORESEARCH_ALLOW_UNSANDBOXED=1 for the App or the Action (the report then says so)")
INIT_PATH = "/.autoresearch-init"
# Root-only files masked in every sandbox of a root worker, besides running it as another uid.
ROOT_ONLY = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/ssh/")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create the namespaces; the message names the fix."""


@dataclass(frozen=True)
class Mount:
    path: str                       # where the sandbox sees it
    writable: bool = False
    source: str = ""                # what backs it on this machine ('' = `path` itself)
    base: str = ""                  # set: `source` is relative to this trusted folder and opened below
                                    # it without following a link, then bound from that descriptor


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
    limits: Limits = field(default_factory=Limits)


_HIDDEN: set[str] = set()


def hide(*paths: str | Path) -> None:
    """Mask these files or folders in every sandbox of this process (called by whoever holds a
    secret file, e.g. the App's settings with its private key's path). The mask covers the system
    directories; anywhere else a sandbox sees only its tree and declared paths, and
    `jobs.measure.isolation.Isolation.from_spec` refuses a declared path that is, contains or lies in one."""
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
    overflow: str = ""              # the cap its output hit (the step was killed there), or ''


def environment(passthrough: tuple[str, ...] | list[str], extra: dict[str, str] | None = None,
                source: dict[str, str] | None = None, home: str = "/home/sandbox") -> dict[str, str]:
    """The environment a step gets: the harmless base names and `passthrough` names copied from
    `source` (the runner's environment), then `extra` (e.g. AUTORESEARCH_SEED). Pure."""
    from jobs.guard.secrets import target_may_see
    source = os.environ if source is None else source
    env = {name: source[name] for name in (*BASE_ENV, *passthrough)
           if name in source and target_may_see(name)}
    env.setdefault("PATH", DEFAULT_PATH)
    env.update(HOME=home, TMPDIR="/tmp", USER="sandbox", LOGNAME="sandbox")
    env.update(extra or {})
    return env


def bwrap_argv(policy: Policy, command: list[str], *, existing: set[str], userns: bool, init_fd: int,
               as_uid: int | None = None, fds: dict[str, int] | None = None) -> list[str]:
    """The bubblewrap command line for `command` under `policy`, with the init read from `init_fd`
    as PID 1, dropping to `as_uid` first when given (a root worker). `fds` maps a mount's path to
    the descriptor it is bound from (its `base` mounts: `--bind-fd`, never a path bubblewrap would
    resolve again). Pure: `existing` says which system paths exist on this machine."""
    fds = fds or {}
    argv = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--as-pid-1", "--unshare-net",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL"]
    if userns:
        argv += ["--unshare-user", "--disable-userns"]
    if as_uid is not None:      # only the init holds these; the step loses them when it drops to `as_uid`
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_KILL"]
    for d in SYSTEM_DIRS:
        if d in existing:
            argv += ["--ro-bind", d, d]
    for link in SYSTEM_LINKS:
        target = existing_link(link, existing)
        if target:
            argv += ["--symlink", target, link]
        elif link in existing:
            argv += ["--ro-bind", link, link]
    size = str(policy.limits.tmpfs_mib * MIB)
    argv += ["--dev", "/dev", "--proc", "/proc"]
    for tmp in ("/tmp", "/dev/shm", policy.home):
        argv += ["--perms", "1777", "--size", size, "--tmpfs", tmp]
    argv += ["--perms", "1777", "--dir", "/var/tmp"]
    dirs = [h for h in policy.hidden if h.endswith("/")]
    for path in policy.hidden:      # after the system binds, so the mask lies on top of them
        if any(path != d and path.startswith(d) for d in dirs):
            continue                # inside a folder that is masked as a whole
        if any(path == d or path.startswith(d + "/") for d in SYSTEM_DIRS if d in existing):
            argv += ["--tmpfs", path] if path.endswith("/") else ["--ro-bind", "/dev/null", path]
    argv += _parent_dirs([m.path for m in policy.mounts] + [str(policy.tree)], existing)
    for m in policy.mounts:
        if m.base:
            argv += ["--bind-fd" if m.writable else "--ro-bind-fd", str(fds[m.path]), m.path]
        else:
            argv += ["--bind" if m.writable else "--ro-bind", m.source or m.path, m.path]
    tree = str(policy.tree)
    argv += ["--bind" if policy.tree_writable else "--ro-bind", tree, tree, "--chdir", tree,
             "--perms", "0555", "--ro-bind-data", str(init_fd), INIT_PATH, "--clearenv"]
    for name, value in sorted(policy.env.items()):
        argv += ["--setenv", name, value]
    drop = ["-u", str(as_uid)] if as_uid is not None else []
    return argv + ["--", INIT_PATH, *drop, *command]


def _parent_dirs(paths: list[str], existing: set[str]) -> list[str]:
    """`--dir` for the folders above each bind's destination that bubblewrap would otherwise create
    0700 in its tmpfs (untraversable for a root worker's unprivileged step). Existing ones keep their
    mode; those inside a read-only system bind exist already."""
    system = [d for d in (*SYSTEM_DIRS, *SYSTEM_LINKS) if d in existing or existing_link(d, existing)]
    parents = {str(p) for path in paths for p in Path(path).parents if str(p) != "/"}
    argv: list[str] = []
    for d in sorted(parents, key=lambda p: (p.count("/"), p)):
        if not any(d == s or d.startswith(s + "/") for s in system):
            argv += ["--perms", "0755", "--dir", d]
    return argv


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
def check() -> bool:
    """Whether bubblewrap works here; returns True for user-namespace mode, False for the root
    mode (no user namespace; the init drops to `Limits.sandbox_uid`). A root worker tries the root
    mode first: in a user namespace its uid would still own root's files. Raises SandboxUnavailable."""
    exe = shutil.which("bwrap")
    if exe is None:
        raise SandboxUnavailable(f"bubblewrap (bwrap) is not installed; {INSTALL_HINT}; {OPT_OUT}")
    errors = []
    for userns in ((False, True) if os.geteuid() == 0 else (True,)):
        try:
            proc = _launch(Policy(tree=Path("/tmp"), tree_writable=False), "true", userns)
            out, _ = proc.communicate(timeout=30)
        except InitUnavailable as exc:
            raise SandboxUnavailable(str(exc)) from None
        if proc.returncode == 0:
            return userns
        errors.append(out.decode(errors="replace").strip() or f"exit {proc.returncode}")
    raise SandboxUnavailable(f"bubblewrap cannot create its namespaces here ({'; '.join(errors)}); "
                             f"{INSTALL_HINT}; {OPT_OUT}")


def _launch(policy: Policy, command: str, userns: bool, *, cwd: Path | None = None,
            cpus: set[int] | None = None) -> subprocess.Popen:
    """Start `bash -c command` in bubblewrap under `policy`, its rlimits applied (a root worker's
    step as the unprivileged uid, with root's own files masked besides)."""
    as_uid = policy.limits.sandbox_uid if os.geteuid() == 0 and not userns else None
    if os.geteuid() == 0:
        masks = tuple(p for p in ROOT_ONLY if os.path.exists(p))
        policy = replace(policy, hidden=(*policy.hidden, *masks))
    fds: dict[str, int] = {}
    fd = init_fd()
    try:
        for m in policy.mounts:
            if m.base:      # opened here, the moment before bubblewrap binds it (jobs.guard.cachedirs)
                fds[m.path] = cachedirs.open_beneath(m.base, m.source)
        argv = bwrap_argv(policy, ["bash", "-c", command], existing=_system_paths(), userns=userns,
                          init_fd=fd, as_uid=as_uid, fds=fds)
        affinity = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        return subprocess.Popen(policy.limits.wrap(argv), cwd=cwd, env={"PATH": os.environ.get("PATH", DEFAULT_PATH)},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, pass_fds=(fd, *fds.values()), preexec_fn=affinity)
    finally:
        for opened in (fd, *fds.values()):
            os.close(opened)


def grant_tree(tree: Path, gid: int) -> None:
    """Make a tree writable for the sandbox's group (a root worker's steps run as another uid): the
    owner stays root, so git still trusts it; `.git` files and folders are left alone, and the tree's
    root dir gets the sticky bit, so the step cannot replace the `.git` file there (nor any other
    file it did not create)."""
    for parent, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if d != ".git"]          # git's own files stay root's alone
        for name in (parent, *(os.path.join(parent, f) for f in files if f != ".git")):
            try:
                info = os.lstat(name)
                if stat.S_ISLNK(info.st_mode):
                    continue
                extra = stat.S_IRWXG if stat.S_ISDIR(info.st_mode) else stat.S_IRGRP | stat.S_IWGRP
                if info.st_gid != gid:
                    os.chown(name, -1, gid, follow_symlinks=False)
                if info.st_mode & extra != extra or info.st_gid != gid:     # chown clears setgid bits
                    os.chmod(name, stat.S_IMODE(info.st_mode) | extra)
            except FileNotFoundError:
                continue
    os.chmod(tree, stat.S_IMODE(os.stat(tree).st_mode) | stat.S_ISVTX)


def run(command: str, cwd: Path, timeout: float, *, policy: Policy | None,
        env: dict[str, str] | None = None, cpus: set[int] | None = None, limits: Limits | None = None,
        cancel: threading.Event | None = None) -> Completed:
    """Run `bash -c command` (in the sandbox when `policy` is given, else in a process group of
    its own with `env`), kill the whole tree at `timeout`, when its output passes the cap or when
    `cancel` is set (then it ends as a timeout does: returncode None), and measure its wall and CPU time."""
    limits = policy.limits if policy is not None else (limits or Limits())
    start = time.monotonic()
    if policy is not None:
        userns = check()
        if os.geteuid() == 0 and not userns and policy.tree_writable:
            grant_tree(policy.tree, limits.sandbox_uid)
        try:
            proc = _launch(policy, command, userns, cwd=cwd, cpus=cpus)
        except cachedirs.CacheDirError as exc:      # a cache's backing turned into a link: nothing runs
            return Completed(126, f"the sandbox was not started: {exc}\n", time.monotonic() - start, 0.0, True)
    else:
        affinity = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        proc = subprocess.Popen(limits.wrap(["bash", "-c", command]), cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=affinity)
    cap = limits.output_mib * MIB
    chunks: list[bytes] = []
    overflow = threading.Event()

    def read() -> None:
        size = 0
        with contextlib.suppress(OSError, ValueError):      # closed under us: a daemon kept the pipe
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):
                if size < cap:
                    chunks.append(chunk[:cap - size])
                size += len(chunk)
                if size > cap and not overflow.is_set():
                    overflow.set()
                    _kill_group(proc.pid)           # read no further: the step ends here
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        _kill_group(proc.pid)
    timer = threading.Timer(timeout, kill)
    timer.start()
    finished = threading.Event()
    if cancel is not None:
        def watch() -> None:        # polls: the step ends on its own far more often than it is cancelled
            while not finished.is_set():
                if cancel.wait(0.2):
                    kill()
                    return
        threading.Thread(target=watch, daemon=True).start()
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
        finished.set()
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if policy is None:
        _kill_group(proc.pid)        # unsandboxed: a daemon that left the group is beyond reach
    reader.join(timeout=5)
    proc.stdout.close()
    output = b"".join(chunks).decode("utf-8", errors="replace")
    code = None if timed_out.is_set() else proc.returncode
    why = f"its output passed the cap of {limits.output_mib} MiB (AUTORESEARCH_LIMIT_OUTPUT_MIB)" \
        if overflow.is_set() else ""
    return Completed(code, output, wall, usage.ru_utime + usage.ru_stime, policy is not None, why)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):   # the group may already be gone
        os.killpg(pgid, signal.SIGKILL)
