"""A read-only, live dashboard of runs (a Flask blueprint on the App).

GET /runs                  the runs the viewer may see
GET /runs/<run_id>         one run: phase, waves, each experiment's status and A/B result per
                           platform, cost so far, and an inline-SVG chart of the primary metric
                           per experiment against the baseline (no CDN, no external assets)
GET /runs/<run_id>.json    the same page body as JSON {version, final, html, run}; the page polls
                           it and swaps the body in when `version` changes (live while the run goes)

Data: the run folders the worker and the Action write, read through `jobs.api` (`list_runs`,
`read_run`: this package does not know their layout), and the App's run record when a store is
given (state, pull request). Nothing is written; logs, environment, tokens and settings are never
rendered (only the fields `view.run_view` keeps are).

Access (`auth`): a signed link, minted with
`python -m bot.dashboard link --user LOGIN [--repo OWNER/NAME [--run RUN_ID]] [--hours H]`: a grant
names the repository and the run (run ids repeat across repositories). Opening it sets a signed,
HttpOnly, SameSite=Strict cookie and redirects to the same page without the token.

Parts: `auth` (keys, links, cookies), `view` (pure: a run's view and its chart), `templates`
(the HTML), and here the blueprint and the `link` command.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import sys
import time
from pathlib import Path
from urllib.parse import quote

from flask import Blueprint, Response, abort, g, jsonify, redirect, render_template_string, request

from jobs import api

from .auth import (COOKIE, COOKIE_SALT, LINK_SALT, allowed_users, cookie_for, make_token, may_see, read_grant,
                   signing_key)
from .templates import BODY, LIST, PAGE
from .view import chart, run_view

__all__ = ["blueprint", "chart", "load_run", "main", "make_token", "run_view", "signing_key"]
POLL_MS = 1500


def load_run(root: Path, run_id: str, repo: str | None = None, store=None) -> dict | None:
    """The view of one run from its folder (and the App's record, if a store is given)."""
    files = api.read_run(root, run_id, repo)
    if files is None:
        return None
    record = None
    if store is not None:
        try:
            record = store.get_run(files.repo, run_id)
        except Exception:           # Redis down: the files still tell the story
            record = None
    view = run_view(files.repo, run_id, files.state, files.records, files.summary, record, files.parallel,
                    files.primary)
    view["version"] = hashlib.sha256(json.dumps(view, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return view


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


def blueprint(settings=None, *, root: Path | None = None, store=None, env: dict[str, str] | None = None) -> Blueprint:
    """The dashboard for the App (`settings`: workdir, Redis, webhook secret) or any run root."""
    env = dict(os.environ if env is None else env)
    root = Path(root or settings.workdir)
    key = signing_key(env, getattr(settings, "webhook_secret", ""))
    users = allowed_users(env)
    if store is None and settings is not None and getattr(settings, "redis_url", ""):
        from ..store import Store, connect
        store = Store(connect(settings.redis_url))
    bp = Blueprint("dashboard", __name__)

    def page(status: int = 200, **kw) -> Response:
        values = dict(nonce=g.nonce, src="", version="", final=True, live=False, updated="", user="nobody",
                      poll_ms=POLL_MS)
        return Response(render_template_string(PAGE, **{**values, **kw}), status, mimetype="text/html")

    def deny(status: int, why: str) -> Response:
        return page(status, title="access", body=f"<h1>{why}</h1><p>Ask a maintainer for a signed dashboard link "
                    "(<code>python -m bot.dashboard link</code>).</p>")

    @bp.before_request
    def authenticate():
        g.nonce = secrets.token_urlsafe(16)
        if request.method not in ("GET", "HEAD"):
            abort(405)
        token = request.args.get("token")
        if token:
            grant = read_grant(key, token, LINK_SALT, users)
            if grant is None:
                return deny(403, "This link is invalid or has expired.")
            value, max_age = cookie_for(key, grant)
            rest = [(k, v) for k, v in request.args.items(multi=True) if k != "token"]
            query = "&".join(f"{quote(k)}={quote(v)}" for k, v in rest)
            resp = redirect(request.path + (f"?{query}" if query else ""), code=303)
            resp.set_cookie(COOKIE, value, max_age=max_age, httponly=True, samesite="Strict",
                            secure=request.is_secure, path="/runs")
            return resp
        grant = read_grant(key, request.cookies.get(COOKIE, ""), COOKIE_SALT, users)
        if grant is None:
            return deny(401, "Sign in with a dashboard link to see runs.")
        g.grant = grant

    @bp.after_request
    def headers(resp):
        nonce = g.get("nonce", "")
        resp.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
            "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
        resp.headers["Cache-Control"] = "no-store"
        resp.headers["Referrer-Policy"] = "no-referrer"
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["X-Frame-Options"] = "DENY"
        return resp

    def one(run_id: str) -> dict:
        repo = request.args.get("repo") or (g.grant["p"] if g.grant["p"] != "*" else None)
        files = api.read_run(root, run_id, repo)
        if files is None or not may_see(g.grant, files.repo, run_id):
            abort(404)
        view = load_run(root, run_id, files.repo, store)
        if view is None:
            abort(404)
        return view

    def body(view: dict) -> str:
        return render_template_string(BODY, v=view, ch=chart(view))

    @bp.get("/runs")
    def runs():
        views = []
        for layout in api.list_runs(root):
            if may_see(g.grant, layout.full_name, layout.run_id):
                v = load_run(root, layout.run_id, layout.full_name, store)
                if v:
                    v["href"] = f"/runs/{layout.run_id}?repo={layout.full_name}"
                    views.append(v)
        return page(title="runs", body=render_template_string(LIST, runs=views), updated=_now(), user=g.grant["u"])

    @bp.get("/runs/<run_id>.json")
    def run_json(run_id: str):
        view = one(run_id)
        return jsonify(version=view["version"], final=view["final"], html=body(view), run=view)

    @bp.get("/runs/<run_id>")
    def run_page(run_id: str):
        view = one(run_id)
        src = f"/runs/{run_id}.json" + (f"?repo={request.args['repo']}" if request.args.get("repo") else "")
        return page(title=run_id, body=body(view), src=src, version=view["version"], final=view["final"],
                    live=True, updated=_now(), user=g.grant["u"])

    return bp


def main(argv: list[str] | None = None) -> int:
    """`python -m bot.dashboard link --user LOGIN [--repo OWNER/NAME [--run RUN_ID]] [--hours H] [--base-url URL]`"""
    parser = argparse.ArgumentParser(prog="python -m bot.dashboard")
    sub = parser.add_subparsers(dest="cmd", required=True)
    link = sub.add_parser("link", help="print a signed dashboard link")
    link.add_argument("--user", required=True, help="the GitHub login the link is for")
    link.add_argument("--repo", help="only this repository, owner/name (default: every repository)")
    link.add_argument("--run", help="only this run id of --repo (default: every run)")
    link.add_argument("--hours", type=float, default=24.0)
    link.add_argument("--base-url", default="http://127.0.0.1:8000")
    args = parser.parse_args(argv)
    key = signing_key(webhook_secret=os.environ.get("AUTORESEARCH_WEBHOOK_SECRET", ""))
    users = allowed_users()
    if users and args.user.lower() not in users:
        print(f"{args.user} is not in AUTORESEARCH_DASHBOARD_USERS; the link would be refused", file=sys.stderr)
        return 2
    try:
        token = make_token(key, args.user, args.run, args.hours * 3600, repo=args.repo)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    path = f"/runs/{args.run}" if args.run else "/runs"
    print(f"{args.base_url.rstrip('/')}{path}?token={token}")
    return 0
