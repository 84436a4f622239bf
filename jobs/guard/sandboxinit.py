"""PID 1 of every sandbox (`INIT_SOURCE`), and how it reaches the sandbox without a path to replace.

The init is compiled once per process (`cc`, in a private 0700 temporary folder that is removed
right away), and its bytes are kept in a sealed memfd: no file on any filesystem holds it, so no
declared cache, no tree and no other repository's build can replace it (issue 20, N2: an init
kept under the cache root was replaced by a build and became PID 1 of every later sandbox).
Before each use its bytes are hashed again and compared with the hash taken when it was built
(a mismatch rebuilds it), and bubblewrap copies exactly those bytes into the sandbox
(`--ro-bind-data`, from a fresh descriptor of the memfd).

The init runs the step, and when the step's main process exits it SIGKILLs every other process
of the namespace and reaps them itself (so their CPU time is charged to the step). Given `-u UID`
(a root worker, see `jobs.guard.sandbox`) the step's process drops to that uid and gid before it runs,
which clears every capability: the step runs as an unprivileged user, so root-only files such as
/etc/shadow stay unreadable; it then enters a user namespace of its own that maps only that uid
(the kernel keeps user keyrings per user namespace, so no step finds a key another step stored,
A5). Every step also joins a new session keyring instead of the one inherited from the runner. The init itself stays uid 0 with the three capabilities bubblewrap
left it (setuid, setgid, kill), in the sandbox's own namespaces: a parent-death signal from a
killed bubblewrap needs the same uid, and ending the step's stragglers needs CAP_KILL.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

INIT_SOURCE = r"""
/* PID 1 of an autoresearch sandbox: [-u UID] run argv[..], wait for it, then kill and reap every
 * other process of the PID namespace so that their CPU time is charged to the sandbox. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#define JOIN_SESSION_KEYRING 1   /* KEYCTL_JOIN_SESSION_KEYRING */
static int put(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t) strlen(text) ? 0 : -1;
}
/* The step's own user namespace, mapping only its uid to itself: a user keyring of its own (the
 * kernel keeps user keyrings per namespace), no channel to a step of another sandbox. */
static int own_userns(long id) {
    char map[64];
    snprintf(map, sizeof map, "%ld %ld 1\n", id, id);
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);     /* the uid change made /proc/self root's until the exec */
    return (unshare(CLONE_NEWUSER) != 0 || put("/proc/self/setgroups", "deny") != 0
            || put("/proc/self/uid_map", map) != 0 || put("/proc/self/gid_map", map) != 0) ? -1 : 0;
}
int main(int argc, char **argv) {
    int first = 1;
    long drop = -1;
    if (argc > 3 && strcmp(argv[1], "-u") == 0) { drop = strtol(argv[2], NULL, 10); first = 3; }
    if (argc <= first) return 127;
    pid_t child = fork();
    if (child < 0) { perror("autoresearch-init: fork"); return 127; }
    if (child == 0) {
        /* The step drops to the sandbox uid (which clears every capability); this init keeps uid 0,
         * so the runner's bubblewrap may still signal it (--die-with-parent), and CAP_KILL to end
         * the step's stragglers. */
        uid_t id = (uid_t) drop;
        if (drop >= 0 && (setgroups(0, NULL) != 0 || setresgid(id, id, id) != 0 || setresuid(id, id, id) != 0)) {
            perror("autoresearch-init: dropping to the sandbox uid"); _exit(127);
        }
        if (drop >= 0 && own_userns(drop) != 0) {
            perror("autoresearch-init: a user namespace of the step's own (allow unprivileged user namespaces)");
            _exit(127);
        }
        /* A session keyring of its own: the one inherited from the runner is shared by every step. */
        if (syscall(SYS_keyctl, JOIN_SESSION_KEYRING, (char *) 0) < 0 && errno != ENOSYS && errno != EPERM) {
            perror("autoresearch-init: a session keyring of its own"); _exit(127);
        }
        execvp(argv[first], argv + first); perror("autoresearch-init: exec"); _exit(127);
    }
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
SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE

_lock = threading.Lock()
_built: dict[str, object] = {}       # "fd": the sealed memfd, "sha256": its bytes' hash when built


class InitUnavailable(RuntimeError):
    """No C compiler, or it failed; the message names the fix."""


def compile_init() -> bytes:
    """INIT_SOURCE compiled (static where the libc allows), in a private folder removed at once."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise InitUnavailable("the sandbox needs a C compiler (cc) to build its init; install gcc, "
                              "or run with --no-sandbox")
    with tempfile.TemporaryDirectory(prefix="autoresearch-init-") as tmp:   # mode 0700
        src, out = os.path.join(tmp, "init.c"), os.path.join(tmp, "init")
        with open(src, "w") as fh:
            fh.write(INIT_SOURCE)
        proc = subprocess.run([cc, "-O2", "-static", "-o", out, src], capture_output=True, text=True)
        if proc.returncode != 0:      # no static libc here: a dynamic binary sees /usr/lib all the same
            proc = subprocess.run([cc, "-O2", "-o", out, src], capture_output=True, text=True)
        if proc.returncode != 0:
            raise InitUnavailable(f"could not compile the sandbox init with {cc}: {proc.stderr.strip()[-500:]}")
        with open(out, "rb") as fh:
            return fh.read()


def _sealed(data: bytes) -> int:
    fd = os.memfd_create("autoresearch-init", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
    return fd


def _digest(fd: int) -> str:
    h, offset = hashlib.sha256(), 0
    while chunk := os.pread(fd, 1 << 20, offset):
        h.update(chunk)
        offset += len(chunk)
    return h.hexdigest()


def init_fd() -> int:
    """A new read-only descriptor (own offset, not inherited by accident) of the verified init;
    the caller passes it to bubblewrap and closes it. Rebuilds the init when its hash differs."""
    with _lock:
        fd = _built.get("fd")
        if fd is None or _digest(fd) != _built["sha256"]:
            if fd is not None:
                os.close(fd)
            data = compile_init()
            fd = _sealed(data)
            _built.update(fd=fd, sha256=hashlib.sha256(data).hexdigest())
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)


def init_sha256() -> str:
    """The hash of the init every sandbox of this process runs (building it if need be)."""
    os.close(init_fd())
    return str(_built["sha256"])
