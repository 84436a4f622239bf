"""Publishing never shares a moment with target code: `jobs.api.start`, the only way the bot runs a
pipeline, returns (and so hands `Flow.publish` the summary it needs) only once every process the run
started is gone, even a daemon that target code detached where no sandbox was there to kill it."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from jobs import api
from jobs.run import reaper
from jobs.guard.operator import OperatorPolicy
from conftest import alive, git
from synthetic import FASTER, patch_for, synthetic_target


def wait_for(path: Path, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError(f"{path} was not written")


def test_orphans_of_the_block_are_ended_and_what_was_there_before_is_left_alone(tmp_path):
    before = subprocess.Popen(["sleep", "60"])
    pidfile = tmp_path / "daemon.pid"
    try:
        with reaper.ended_processes():
            # A double fork into a session of its own: without a subreaper it would be init's child.
            subprocess.run(["bash", "-c", f"(setsid bash -c 'echo $$ > {pidfile}; exec sleep 300' "
                                          "</dev/null >/dev/null 2>&1 &)"], check=True)
            daemon = wait_for(pidfile)
            assert alive(daemon)
            assert reaper.descendants(os.getpid())[daemon][0] == os.getpid()   # adopted by us, not by init
        assert not alive(daemon)
        assert alive(before.pid) and before.poll() is None
    finally:
        before.kill()
        before.wait()


def test_start_returns_only_after_a_detached_daemon_of_an_unsandboxed_target_is_gone(tmp_path):
    layout = api.RunLayout(tmp_path / "work", "octo", "synth", "1-order")
    target = synthetic_target(layout.clone)
    pidfile = tmp_path / "daemon.pid"
    build = (target / "build.sh").read_text()
    (target / "build.sh").write_text(f"[ -s {pidfile} ] || (setsid bash -c 'echo $$ > {pidfile}; exec sleep 300' "
                                     f"</dev/null >/dev/null 2>&1 &)\n" + build)
    cfg = target / ".github" / "autoresearch.yml"
    cfg.write_text(cfg.read_text() + "sandbox: {enabled: false}\n")
    git(target, "add", "-A")
    git(target, "commit", "-qm", "a build that leaves a daemon behind")
    patch = patch_for(target, tmp_path / "faster.patch", {"src/speed.txt": FASTER})
    # A repository's opt-out counts only where the operator allows it (issue 20, F1a).
    prep = api.prepare_candidates(layout, git(target, "rev-parse", "HEAD"), [patch], "local")
    summary = api.start(prep, executor="local", agent="none", operator=OperatorPolicy(allow_unsandboxed=True))
    assert summary.sandboxed is False
    daemon = int(pidfile.read_text())
    try:
        assert not alive(daemon), "a process of the target outlived the run: publishing would share its moment"
    finally:
        if alive(daemon):
            os.kill(daemon, 9)
