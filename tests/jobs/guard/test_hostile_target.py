"""A hostile target through the CLI (`autoresearch run`): its build does what the attacker of issue
#11 did, on a machine where the App lives. Every attempt fails, the run completes, nothing it
started outlives it, and no secret reaches a log or a report. (The App's end-to-end path is
tests/bot/test_hostile_app.py, with the same target.)"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from conftest import ROOT

pytestmark = [pytest.mark.measures,
              pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap is installed by `make test` (tests/system-deps.sh)")]

from hostile import (CANARY_TOKEN, CANARY_WEBHOOK, Hostile, assert_nothing_leaked, hostile_target,  # noqa: F401
                     secret_needles)


@pytest.fixture()
def app_secret(tmp_path) -> Path:
    """A stand-in for the App's private key, outside every tree, as the App keeps it."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path / "app" / "github-app.pem"
    path.parent.mkdir()
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    return path


def test_a_hostile_target_through_the_cli_is_contained(tmp_path, redis_url, app_secret, request):
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    h = hostile_target(tmp_path, app_secret, port)
    request.addfinalizer(h.cleanup)
    out = tmp_path / "out"
    # The CLI on the App's machine: the App's settings and a token are in its environment.
    env = {**os.environ, "AUTORESEARCH_PRIVATE_KEY_PATH": str(app_secret), "AUTORESEARCH_REDIS_URL": redis_url,
           "AUTORESEARCH_WEBHOOK_SECRET": CANARY_WEBHOOK, "GITHUB_TOKEN": CANARY_TOKEN}
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "run", str(h.target), "--agent", "none",
                           "--candidate", str(h.patch), "--run-id", "hostile", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    h.assert_contained(redis.Redis.from_url(redis_url))
    summary = (out / "summary.json").read_text()
    assert '"sandboxed": true' in summary and "faster" in (out / "pr.md").read_text()
    assert_nothing_leaked(secret_needles(app_secret), proc.stdout, proc.stderr, out, h.target)
