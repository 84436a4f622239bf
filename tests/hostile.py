"""The hostile target of issue 11 and its leak check, shared by the CLI test
(tests/jobs/guard/test_hostile_target.py) and the App's (tests/bot/test_hostile_app.py and friends)."""
from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import redis

from conftest import git
from synthetic import FASTER, patch_for, synthetic_target, with_timeouts

# What the build tries (in the first build of the run), each attempt reported in one line to
# `attempts.txt`, in the one place outside its tree a sandboxed build may write: a cache directory
# its config declares.
HOSTILE_BUILD = r"""
R={report}/attempts.txt
if [ ! -e $R ]; then      # once per run: the first build (later builds are the same attacker)
# 1. the App's private key, by its path and by a bounded search
if head -c 200 {secret} >/dev/null 2>&1; then echo "key: READ $(sed -n 2p {secret})" >> $R; else echo "key: denied" >> $R; fi
found=$(timeout 30 find / \( -path /proc -o -path /sys \) -prune -o -name '{secret_name}' -print 2>/dev/null | head -3)
echo "find: ${{found:-nothing}}" >> $R
# 2. other processes' environments (the worker's, git's during a push)
hits=$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -E 'AUTORESEARCH_|ghs_|TOKEN|PRIVATE|SECRET' | head -3)
echo "environ: ${{hits:-nothing}}" >> $R
echo "processes: $(ls -d /proc/[0-9]* | wc -l)" >> $R
# 3. the App's Redis on loopback
if (exec 3<>/dev/tcp/127.0.0.1/{redis_port} && printf 'SET pwned-{marker} 1\r\n' >&3) 2>/dev/null; then
  echo "redis: CONNECTED" >> $R; else echo "redis: refused" >> $R; fi
# 4. a daemon that outlives the step (and would watch the push)
setsid nohup bash -c 'exec -a hostile-daemon-{marker} sleep 600' >/dev/null 2>&1 &
echo "daemon: started" >> $R
# 5. the host's /tmp
echo pwned > /tmp/hostile-{marker} && echo "tmp: written" >> $R
fi
true
"""


@dataclass
class Hostile:
    target: Path
    patch: Path
    report: Path                     # attempts.txt is written here
    secret: Path                     # the file it must not read (the App's private key)
    marker: str

    def attempts(self) -> list[str]:
        # The declared cache is the build's view; what it wrote is kept in its repository's namespace.
        from jobs.measure.isolation import backings
        return [line for d in backings(self.report) if (d / "attempts.txt").is_file()
                for line in (d / "attempts.txt").read_text().splitlines()]

    def cleanup(self) -> None:
        from jobs.measure.isolation import backings
        for d in [self.report, *backings(self.report)]:
            shutil.rmtree(d, ignore_errors=True)

    def daemons(self) -> list[int]:
        """Live processes of the daemon its build started, anywhere on this machine."""
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
            except OSError:
                continue
            if f"hostile-daemon-{self.marker}".encode() in cmdline and state != "Z":
                found.append(int(pid))
        return found

    def assert_contained(self, r: redis.Redis) -> None:
        """Every attempt of the build failed, and nothing it started is alive."""
        attempts = self.attempts()
        assert attempts, "the hostile build never ran"
        assert "key: denied" in attempts and "find: nothing" in attempts, attempts
        assert "environ: nothing" in attempts, attempts
        processes = int(next(a for a in attempts if a.startswith("processes:")).split()[1])
        assert processes <= 10, attempts                # only the sandbox's own few processes
        assert "redis: refused" in attempts and not r.exists(f"pwned-{self.marker}"), attempts
        assert "daemon: started" in attempts and self.daemons() == []
        assert "tmp: written" in attempts and not Path(f"/tmp/hostile-{self.marker}").exists()


def hostile_target(tmp_path: Path, secret: Path, redis_port: int) -> Hostile:
    """The synthetic target with the hostile build and one maintainer candidate that is faster (so
    the run has something to publish)."""
    marker = uuid.uuid4().hex[:12]
    # Declared caches must live under the cache root; this one is removed by the caller.
    report = Path.home() / ".cache" / "autoresearch" / f"hostile-{marker}"
    report.mkdir(parents=True)
    t = synthetic_target(tmp_path / "target")
    patch = patch_for(t, tmp_path / "faster.patch", {"src/speed.txt": FASTER})
    (t / "build.sh").write_text(HOSTILE_BUILD.format(report=report, secret=secret, secret_name=secret.name,
                                                     redis_port=redis_port, marker=marker)
                                + (t / "build.sh").read_text())
    cfg = t / ".github" / "autoresearch.yml"
    # Its first build runs a bounded `find /` (up to 30 s): beside two CPU hogs and the suite's other
    # worker it passed the synthetic target's 20 s build timeout once, and the run failed at its
    # baseline instead of showing the attempts. 90 s covers the search. Likewise its ~50 ms benchmark
    # passed the synthetic 3 s limit once there (2026-12-05: "baseline benchmark exceeded 3 s", in the
    # calibration's first pair, with its METRIC lines printed): what this target tests is containment,
    # not a benchmark's time limit, so the limit leaves a loaded machine room.
    cfg.write_text(with_timeouts(cfg.read_text(), build=90, benchmark=30) + f"sandbox: {{caches: ['{report}']}}\n")
    git(t, "add", "-A")
    git(t, "commit", "-qm", "a hostile build")
    return Hostile(t, patch, report, secret, marker)


def secret_needles(secret: Path) -> list[str]:
    """What must appear nowhere: the key's lines, and the canary values of the App's settings."""
    lines = [line for line in secret.read_text().splitlines() if line and not line.startswith("-----")]
    return lines[:3] + [CANARY_TOKEN, CANARY_WEBHOOK]


CANARY_TOKEN = "ghs_canaryInstallationToken0123456789"
CANARY_WEBHOOK = "canary-webhook-secret-5d1e"


def assert_nothing_leaked(needles: list[str], *texts_or_dirs: str | Path) -> None:
    for item in texts_or_dirs:
        if isinstance(item, Path):
            for path in item.rglob("*"):
                if path.is_file() and not path.is_symlink():
                    data = path.read_bytes()
                    for n in needles:
                        assert n.encode() not in data, f"{n[:12]}... leaked into {path}"
        else:
            for n in needles:
                assert n not in item, f"{n[:12]}... leaked into output: {item[:200]}"
