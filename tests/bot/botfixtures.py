"""Fixtures for the bot tests (imported by each test module; a second conftest.py would shadow the
root one): the fake GitHub on loopback, local bare git remotes, the private Redis,
the real Flask app served over HTTP, real RQ workers, and GitHub's own example payloads."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from werkzeug.serving import make_server

import bot.tasks  # noqa: F401  preloaded: forked RQ work horses inherit it instead of importing
from conftest import git

EXAMPLES_PACKAGE = "@octokit/webhooks-examples"
EXAMPLES_VERSION = "7.6.1"          # pinned; tests/system-deps.sh installs the same version
APP_ID = "4242"
BOT_LOGIN = "autoresearch-test[bot]"
SECRET = "test-webhook-secret"


def examples_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "autoresearch-tests" / f"webhooks-examples-{EXAMPLES_VERSION}"


def install_examples() -> Path:
    """`npm install` the pinned examples once into a cache dir; fail (never skip) without npm."""
    prefix = examples_dir()
    index = prefix / "node_modules" / EXAMPLES_PACKAGE / "api.github.com" / "index.json"
    if index.is_file():
        return index
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(f"npm is not installed: it is needed to install {EXAMPLES_PACKAGE}@{EXAMPLES_VERSION} "
                    "(GitHub's webhook example payloads). Run `make system-deps` or apt-get install npm.")
    prefix.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save",
                           f"{EXAMPLES_PACKAGE}@{EXAMPLES_VERSION}"], capture_output=True, text=True, timeout=300)
    if proc.returncode or not index.is_file():
        pytest.fail(f"npm install {EXAMPLES_PACKAGE}@{EXAMPLES_VERSION} failed:\n{proc.stdout}\n{proc.stderr}")
    return index


@pytest.fixture(scope="session")
def webhook_examples() -> list[tuple[str, dict]]:
    """(event name, payload) for every example GitHub publishes for api.github.com."""
    index = json.loads(install_examples().read_text())
    return [(spec["name"], example) for spec in index for example in spec["examples"]]


@pytest.fixture(scope="session")
def app_key(tmp_path_factory) -> tuple[Path, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path_factory.mktemp("app") / "app.pem"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return path, public


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class Delivered:
    status: int
    body: dict
    delivery: str
    seconds: float


@dataclass
class BotEnv:
    url: str                                  # the Flask app over HTTP
    github: object                            # FakeGitHub
    redis: redis.Redis
    env: dict[str, str]
    git_root: Path
    workdir: Path
    template: dict = field(default_factory=dict)

    def deliver(self, event: str, payload: dict | bytes, *, delivery: str | None = None, secret: str = SECRET,
                signature: str | None = None) -> Delivered:
        import http.client
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        delivery = delivery or str(uuid.uuid4())
        headers = {"Content-Type": "application/json", "X-GitHub-Event": event, "X-GitHub-Delivery": delivery,
                   "User-Agent": "GitHub-Hookshot/test"}
        sig = signature if signature is not None else sign(body, secret)
        if sig:
            headers["X-Hub-Signature-256"] = sig
        host, port = self.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        t0 = time.perf_counter()
        conn.request("POST", "/webhook", body=body, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        dt = time.perf_counter() - t0
        conn.close()
        try:
            data = json.loads(raw)
        except ValueError:
            data = {"raw": raw.decode(errors="replace")}
        return Delivered(resp.status, data, delivery, dt)

    def comment_payload(self, full: str, issue: int, login: str, body: str, *, pr: bool = False) -> dict:
        """An issue_comment.created payload from GitHub's own example, pointed at our repo/issue."""
        c = self.github.add_comment(full, issue, login, body)
        p = json.loads(json.dumps(self.template))
        owner, name = full.split("/")
        p["action"] = "created"
        p["comment"].update(id=c["id"], body=body, user=self.github.user(login), created_at=c["created_at"],
                          updated_at=c["updated_at"])
        p["issue"]["number"] = issue
        p["issue"].pop("pull_request", None)
        if pr:
            p["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{full}/pulls/{issue}"}
        p["repository"].update(name=name, full_name=full, default_branch=self.github.repos[full].default_branch,
                               owner=self.github.user(owner))
        p["installation"] = {"id": 77, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNzc="}
        return p

    def comment(self, full: str, issue: int, login: str, body: str, **kw) -> Delivered:
        return self.deliver("issue_comment", self.comment_payload(full, issue, login, body, **kw))

    def work(self, *queues: str) -> None:
        """A real RQ worker in burst mode (forks a work horse per job), in this process."""
        from rq import Worker
        from bot.jobqueue import ALL
        Worker(list(queues or ALL), connection=self.redis).work(burst=True)

    def bot_comments(self, full: str, issue: int) -> list[dict]:
        return [c for c in self.github.issue_comments(full, issue) if c["login"] == BOT_LOGIN]

    def add_target(self, full: str, source: Path) -> Path:
        """Serve the git repo `source` as `full` (a bare clone under git_root)."""
        bare = self.git_root / f"{full}.git"
        bare.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", "--bare", str(source), str(bare)], check=True)
        self.github.add_repo(full, bare, git(source, "rev-parse", "--abbrev-ref", "HEAD"))
        return bare


def github_openapi():
    """GitHub's OpenAPI description, loaded once per process (installed with npm on first use)."""
    from fakes.openapi import openapi
    try:
        return openapi()
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture()
def bot_env(tmp_path, redis_url, app_key, monkeypatch, webhook_examples):
    from fakes.github import FakeGitHub
    from bot.app import create_app
    github_openapi()
    from bot.settings import Settings

    key_path, public = app_key
    git_root = tmp_path / "remotes"
    git_root.mkdir()
    fake = FakeGitHub(git_root, APP_ID, public, bot_login=BOT_LOGIN)
    api = fake.start()
    r = redis.Redis.from_url(redis_url)
    r.flushdb()
    env = {"AUTORESEARCH_APP_ID": APP_ID, "AUTORESEARCH_PRIVATE_KEY_PATH": str(key_path),
           "AUTORESEARCH_WEBHOOK_SECRET": SECRET, "AUTORESEARCH_REDIS_URL": redis_url,
           "AUTORESEARCH_GITHUB_API_URL": api, "AUTORESEARCH_GIT_URL": f"file://{git_root}",
           "AUTORESEARCH_BOT_LOGIN": BOT_LOGIN, "AUTORESEARCH_WORKDIR": str(tmp_path / "work")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    server = make_server("127.0.0.1", 0, create_app(Settings.from_env()), threaded=True)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    template = next(p for e, p in webhook_examples if e == "issue_comment" and p.get("action") == "created")
    yield BotEnv(f"http://127.0.0.1:{server.server_port}", fake, r, env, git_root, tmp_path / "work", template)
    server.shutdown()
    fake.stop()
    assert not fake.violations, "the fake GitHub answered outside GitHub's OpenAPI description:\n" + \
        "\n".join(fake.violations[:20])
