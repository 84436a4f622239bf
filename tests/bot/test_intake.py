"""Hostile and unlucky deliveries (issue 12): deep JSON, a SHA-1 signature, a replayed comment under a
new delivery id, a comment older than the replay window, and Redis hung mid-delivery (SIGSTOP)."""
from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import signal
import subprocess
import threading
import time

import pytest
import redis
from rq import Queue
from werkzeug.serving import make_server

from bot.jobqueue import COMMANDS
from botfixtures import SECRET, BotEnv, app_key, bot_env, webhook_examples  # noqa: F401  (fixtures)
from conftest import free_port

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test


def _now_iso(offset_s: float = 0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset_s))


def command_payload(comment_id: int, body: str = "/autoresearch status", created_at: str | None = None) -> dict:
    return {"action": "created", "installation": {"id": 1}, "issue": {"number": 3},
            "comment": {"id": comment_id, "body": body, "user": {"login": "a", "type": "User"},
                        "created_at": created_at or _now_iso()},
            "repository": {"name": "r", "owner": {"login": "o"}}}


def _jobs_by_comment(r) -> dict[str, int]:
    counts: dict[str, int] = {}
    for job in Queue(COMMANDS, connection=r).jobs:
        counts[job.description] = counts.get(job.description, 0) + 1
    return counts


def test_deep_json_with_a_valid_signature_is_400(bot_env):
    body = b"[" * 3000 + b"]" * 3000
    resp = bot_env.deliver("issue_comment", body)
    assert resp.status == 400, resp.body
    deep = b'{"a":' * 3000 + b"1" + b"}" * 3000
    assert bot_env.deliver("issue_comment", deep).status == 400


def test_an_hmac_sha1_in_the_sha256_header_is_401(bot_env):
    body = json.dumps(command_payload(41)).encode()
    sha1 = "sha1=" + hmac.new(SECRET.encode(), body, hashlib.sha1).hexdigest()
    assert bot_env.deliver("issue_comment", body, signature=sha1).status == 401
    assert bot_env.deliver("issue_comment", body).status == 202        # the same body, signed sha256


def test_a_replayed_comment_with_a_new_delivery_id_is_a_duplicate(bot_env):
    body = json.dumps(command_payload(42)).encode()
    assert bot_env.deliver("issue_comment", body, delivery="first").status == 202
    again = bot_env.deliver("issue_comment", body, delivery="a-new-id")
    assert again.status == 200 and again.body["status"] == "duplicate", again.body
    assert _jobs_by_comment(bot_env.redis) == {"comment 42": 1}


def test_a_comment_older_than_the_replay_window_starts_nothing(bot_env):
    old = command_payload(43, created_at=_now_iso(-8 * 24 * 3600))
    resp = bot_env.deliver("issue_comment", old)
    assert resp.status == 200 and resp.body["status"] == "ignored" and "replay window" in resp.body["reason"]
    undated = command_payload(44)
    del undated["comment"]["created_at"]
    assert bot_env.deliver("issue_comment", undated).body["status"] == "ignored"
    assert Queue(COMMANDS, connection=bot_env.redis).count == 0


@pytest.mark.timeout(120)
def test_a_hung_redis_loses_no_command(bot_env, tmp_path):
    """Redis SIGSTOPped for 7 s (> the client's 5 s timeout) while commands arrive: every delivery
    answered 503 or dropped is redelivered (as GitHub does) after it resumes, and every command is
    queued exactly once."""
    port = free_port()
    proc = subprocess.Popen([shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    try:
        url = f"redis://127.0.0.1:{port}/0"
        r = redis.Redis.from_url(url)
        for _ in range(100):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        from bot.app import create_app
        from bot.settings import Settings
        server = make_server("127.0.0.1", 0, create_app(Settings.from_env({**bot_env.env, "AUTORESEARCH_REDIS_URL": url})),
                             threaded=True)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        env = BotEnv(f"http://127.0.0.1:{server.server_port}", None, r, bot_env.env, tmp_path, tmp_path)
        bodies = {i: json.dumps(command_payload(5000 + i)).encode() for i in range(12)}
        first: dict[int, int] = {}
        lock = threading.Lock()

        def send(i: int) -> None:
            try:
                status = env.deliver("issue_comment", bodies[i], delivery=f"d-{i}").status
            except OSError:
                status = 0
            with lock:
                first[i] = status

        threads = []
        for i in bodies:
            if i == 2:
                proc.send_signal(signal.SIGSTOP)
                stopped = time.monotonic()
            t = threading.Thread(target=send, args=(i,))
            t.start()
            threads.append(t)
            time.sleep(0.4)
        time.sleep(max(0.0, 7 - (time.monotonic() - stopped)))
        proc.send_signal(signal.SIGCONT)
        for t in threads:
            t.join(timeout=30)
        failed = [i for i, s in first.items() if s not in (200, 202)]
        assert failed, f"the stall should have failed some deliveries: {first}"
        for i in failed:                                   # GitHub's redelivery: same id, same body
            assert env.deliver("issue_comment", bodies[i], delivery=f"d-{i}").status in (200, 202)
        for i in bodies:                                   # and any further redelivery is a no-op
            assert env.deliver("issue_comment", bodies[i], delivery=f"d-{i}-again").status == 200
        assert _jobs_by_comment(r) == {f"comment {5000 + i}": 1 for i in bodies}, first
        server.shutdown()
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        proc.wait(timeout=10)
