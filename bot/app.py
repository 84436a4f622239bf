"""The webhook endpoint (Flask). Answers fast; the work happens in RQ jobs.

POST /webhook  https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
  401  bad or missing X-Hub-Signature-256 (`sha256=` HMAC over the raw body, constant time; no other
       algorithm is accepted); nothing stored
  400  body is not a JSON object (or nests too deep to decode), or no X-GitHub-Event header
  200  duplicate (the delivery id or, for a command, its comment was seen before), ignored event, ping
  202  a command was enqueued (dedupe and enqueue are one Redis transaction: bot.intake)
  503  Redis is unreachable (GitHub shows the delivery as failed and it can be redelivered)

Bodies are read by the WSGI server before this code runs: deploy it behind the buffering reverse
proxy of compose.yaml (deploy/nginx), which holds slow or oversized bodies off the workers.
GET /healthz   200 if Redis answers PING, else 503
"""
from __future__ import annotations

import hashlib
import json
import logging
import time

import redis
from flask import Flask, jsonify, request
from githubkit.webhooks import verify

from . import intake
from .routing import Ignored, route
from .settings import Settings
from .store import Store, connect

log = logging.getLogger("autoresearch.bot")


def create_app(settings: Settings | None = None) -> Flask:
    settings = settings or Settings.from_env()
    app = Flask("autoresearch")
    app.config["MAX_CONTENT_LENGTH"] = 25 * 1024 * 1024      # GitHub caps payloads at 25 MB
    conn = connect(settings.redis_url)
    store = Store(conn)

    @app.get("/healthz")
    def healthz():
        try:
            conn.ping()
        except redis.RedisError as exc:
            return jsonify(ok=False, redis=str(exc)), 503
        return jsonify(ok=True)

    @app.post("/webhook")
    def webhook():
        body = request.get_data(cache=False)
        signature = request.headers.get("X-Hub-Signature-256", "")
        try:      # only sha256: githubkit's verify would also take another algorithm's prefix
            valid = signature.startswith("sha256=") and verify(settings.webhook_secret, body, signature)
        except Exception:       # malformed header
            valid = False
        if not valid:
            return jsonify(error="bad signature"), 401
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return jsonify(error="body is not JSON (or nests too deep)"), 400
        event = request.headers.get("X-GitHub-Event", "")
        if not isinstance(payload, dict) or not event:
            return jsonify(error="expected a JSON object and an X-GitHub-Event header"), 400
        delivery = request.headers.get("X-GitHub-Delivery") or "sha256-" + hashlib.sha256(body).hexdigest()
        routed = route(event, payload, delivery=delivery, bot_login=settings.bot_login)
        if not isinstance(routed, Ignored):
            stale = intake.too_old(payload, time.time(), settings.delivery_ttl)
            routed = Ignored(stale) if stale else routed
        try:
            if isinstance(routed, Ignored):
                first = store.first_delivery(delivery, settings.delivery_ttl)
                return jsonify(status="ignored" if first else "duplicate", reason=routed.reason), 200
            job_id = intake.accept(conn, routed, delivery, settings.delivery_ttl)
        except redis.RedisError as exc:
            log.error("redis unavailable: %s", exc)
            return jsonify(error="queue unavailable"), 503
        if job_id is None:
            return jsonify(status="duplicate", delivery=delivery), 200
        return jsonify(status="queued", job=job_id), 202

    from .dashboard import blueprint as dashboard
    app.register_blueprint(dashboard(settings, store=store))     # GET /runs, /runs/<id>: read-only
    return app
