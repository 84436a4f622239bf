"""Issue 43, part 3: pr.md's Reproduce block runs as pasted into a clean shell at the root of this
checkout after the README's set-up (`make demo`/`make test` make `.venv`), without activating
the venv. Rendered for a real small target, extracted from pr.md, run with `env -i` and only
`/usr/bin:/bin` on PATH: the git steps for real, the CLI with `--dry-run` (which, for the local
executor, stops right after the command line and the preflight checks passed)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, git
from jobs.report.report import render_pr
from jobs.run.reporting import Reporting
from jobs.contract.runstate import RunState
from summaries import run_summary
from synthetic import patch_for, synthetic_target

REFUSED = "--dry-run previews cloud tasks and their cost"      # jobs.run.dryrun: the local executor's answer


def reproduce_block(md: str) -> str:
    return re.search(r"```sh\n(.*?)\n```", md.split("## Reproduce")[1], re.S).group(1)


def pasted(script: str, tmp: Path) -> subprocess.CompletedProcess:
    """The block as a reader pastes it, from the checkout's root, the CLI's run made a dry run (and
    without the last line, which shows the pr.md a real run would have written)."""
    *steps, show = script.splitlines()
    assert show.startswith("cat ")
    script = "\n".join(line + " --dry-run" if " run " in line and not line.startswith("#") else line
                       for line in steps)
    return subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", f"TMPDIR={tmp}", "bash", "-c", script], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "autoresearch").exists(),
                    reason="the README's set-up (make demo / make test) has not made .venv in this checkout")
@pytest.mark.parametrize("kept", [True, False])
def test_the_reproduce_block_runs_as_pasted_in_a_clean_shell(tmp_path, kept):
    target = synthetic_target(tmp_path / "target")
    base = git(target, "rev-parse", "HEAD")
    faster = patch_for(target, tmp_path / "faster.patch", {"src/speed.txt": "300\n"})
    if kept:      # the run's branch, one commit on the base, as a confirmed stack leaves it
        git(target, "checkout", "-qb", "autoresearch/r1")
        git(target, "apply", str(faster))
        git(target, "commit", "-qam", "faster")
        git(target, "checkout", "-q", base)
    state = RunState(tmp_path / "out", bench_env_names=["OMP_NUM_THREADS"])
    reporting = Reporting("r1", None, target, tmp_path / "out", state, ["local"], "none", "local", 12, [faster])
    lines = reporting.reproduce(base, "autoresearch/r1" if kept else None)
    md = render_pr(run_summary(reproduce=lines, resume=reporting.resume_command()))
    assert "at the root of an autoresearch checkout" in md.split("## Reproduce")[1]
    proc = pasted(reproduce_block(md), tmp_path)
    out = proc.stdout + proc.stderr
    assert "command not found" not in out, out
    # The CLI parsed the line and its preflight passed on the fresh clone (config, candidate, cap):
    # only then does the local executor refuse a dry run (exit 2).
    assert proc.returncode == 2 and REFUSED in out, out
    # The resume command resolves the same way.
    resume = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "bash", "-c", reporting.resume_command() + " --help"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert resume.returncode == 0 and "--run-id" in resume.stdout, resume.stdout + resume.stderr
