"""POST /webhook over real HTTP: signatures, JSON, dedupe, and every GitHub example payload."""
from __future__ import annotations

import json
import time

from rq import Queue

from bot.jobqueue import ALL, COMMANDS
from botfixtures import SECRET, app_key, bot_env, sign, webhook_examples  # noqa: F401  (fixtures)


def _queued(r) -> int:
    return sum(Queue(q, connection=r).count for q in ALL)


def test_bad_signature_is_401_and_stores_nothing(bot_env):
    payload = {"action": "created", "comment": {"body": "/autoresearch optimize cpu"}}
    body = json.dumps(payload).encode()
    for kw in ({"secret": "wrong"}, {"signature": ""}, {"signature": "sha256=" + "0" * 64},
               {"signature": "sha1=abc"}, {"signature": "garbage"}, {"signature": sign(body + b" ")}):
        resp = bot_env.deliver("issue_comment", body, delivery="d-1", **kw)
        assert resp.status == 401, kw
    assert bot_env.redis.dbsize() == 0
    assert _queued(bot_env.redis) == 0


def test_malformed_json_is_400(bot_env):
    for body in (b"{not json", b"\xff\xfe", b"[1, 2]", b"\"text\"", b""):
        assert bot_env.deliver("issue_comment", body).status == 400, body
    assert bot_env.deliver("", b"{}").status == 400          # no X-GitHub-Event
    assert _queued(bot_env.redis) == 0


def test_every_github_example_is_answered_without_5xx(bot_env, webhook_examples):
    assert len(webhook_examples) > 300
    statuses = {}
    for i, (event, payload) in enumerate(webhook_examples):
        resp = bot_env.deliver(event, payload, delivery=f"ex-{i}")
        assert resp.status < 500, (event, payload.get("action"), resp.body)
        statuses[resp.status] = statuses.get(resp.status, 0) + 1
        again = bot_env.deliver(event, payload, delivery=f"ex-{i}")
        assert again.status == 200 and again.body["status"] == "duplicate"
    assert set(statuses) <= {200, 202}
    # The same examples carrying a command where a comment body is: still never a 5xx.
    for i, (event, payload) in enumerate(webhook_examples):
        if isinstance(payload.get("comment"), dict):
            p = json.loads(json.dumps(payload))
            p["comment"]["body"] = "/autoresearch optimize cpu budget=3"
            p["comment"]["created_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            p["action"] = "created"
            resp = bot_env.deliver(event, p, delivery=f"cmd-{i}")
            assert resp.status < 500, (event, resp.body)
            if event == "issue_comment" and "installation" in p and p["comment"]["user"]["type"] != "Bot":
                assert resp.status == 202, resp.body


def test_duplicate_delivery_enqueues_once(bot_env):
    payload = {"action": "created", "installation": {"id": 1}, "issue": {"number": 3},
               "comment": {"id": 5, "body": "/autoresearch status", "user": {"login": "a", "type": "User"},
                           "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
               "repository": {"name": "r", "owner": {"login": "o"}}}
    first = bot_env.deliver("issue_comment", payload, delivery="same")
    second = bot_env.deliver("issue_comment", payload, delivery="same")
    assert first.status == 202 and second.status == 200 and second.body["status"] == "duplicate"
    assert Queue(COMMANDS, connection=bot_env.redis).count == 1
    assert bot_env.redis.ttl("ar:delivery:same") > 24 * 3600


def test_ping_and_unknown_events_are_2xx(bot_env):
    assert bot_env.deliver("ping", {"zen": "Keep it logically awesome."}).status == 200
    assert bot_env.deliver("made_up_event", {"x": 1}).status == 200
    assert bot_env.deliver("issue_comment", {"action": "edited", "comment": {"body": "/autoresearch cancel"}}).status == 200


def test_healthz_checks_redis(bot_env):
    import http.client
    host, port = bot_env.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.request("GET", "/healthz")
    resp = conn.getresponse()
    assert resp.status == 200 and json.loads(resp.read())["ok"] is True

    from bot.app import create_app
    from bot.settings import Settings
    from conftest import free_port
    down = create_app(Settings.from_env({**bot_env.env, "AUTORESEARCH_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}))
    client = down.test_client()
    assert client.get("/healthz").status_code == 503
    body = json.dumps({"zen": "x"}).encode()
    resp = client.post("/webhook", data=body, headers={"X-GitHub-Event": "ping", "X-GitHub-Delivery": "z",
                                                       "X-Hub-Signature-256": sign(body, SECRET)})
    assert resp.status_code == 503      # GitHub will show it failed; a redelivery can succeed later
