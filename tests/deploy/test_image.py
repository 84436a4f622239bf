"""The shipped image built and run for real (slow: minutes, and root for dockerd): deploy/image-check.sh
builds the image, starts compose.yaml's stack on the host network, and follows a signed
issue_comment through nginx to a draft PR with the worker's sandbox working."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

SKIP = 77


def _why_no_engine() -> str | None:
    """As root the check installs docker.io and debootstrap itself (tests/system-deps.sh --image-check)
    and starts dockerd; otherwise it needs an engine that already answers."""
    if os.geteuid() == 0:
        return None
    if shutil.which("docker") is None:
        return "no docker client, and only root may install one (apt-get install docker.io)"
    if subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode != 0:
        return "no Docker engine answers and only root may start one (dockerd)"
    return None


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_image_builds_starts_and_takes_a_webhook_to_a_draft_pr():
    reason = _why_no_engine()
    if reason:
        pytest.skip(reason)
    proc = subprocess.run([str(ROOT / "deploy" / "image-check.sh")], cwd=ROOT, capture_output=True, text=True,
                          timeout=3500, env={**os.environ, "PYTHON": sys.executable})
    out = proc.stdout + proc.stderr
    if proc.returncode == SKIP:
        pytest.skip(next((ln for ln in out.splitlines() if ln.startswith("SKIP:")), out[-500:]))
    assert proc.returncode == 0, out[-8000:]
    metrics = dict(re.findall(r"^METRIC (\w+)=([\d.]+)$", proc.stdout, re.M))
    for name in ("image_bytes", "stack_up_to_healthz_s", "web_start_to_healthz_s", "webhook_to_draft_pr_s"):
        assert name in metrics, out[-4000:]
    assert "ran sandboxed" in proc.stdout and "PASSED" in proc.stdout
    print("\n".join(ln for ln in proc.stdout.splitlines() if ln.startswith("METRIC")))
