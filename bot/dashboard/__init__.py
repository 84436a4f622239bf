"""A read-only, live dashboard of runs (a Flask blueprint on the App).

GET /runs                  the runs the viewer may see
GET /runs/<run_id>         one run: phase, waves, each experiment's status and A/B result per
                           platform, cost so far, and an inline-SVG chart of the primary metric
                           per experiment against the baseline (no CDN, no external assets)
GET /runs/<run_id>.json    the same page body as JSON {version, final, html, run}; the page polls
                           it and swaps the body in when `version` changes (live while the run goes)

Data: the run directories the worker and the Action write (`<workdir>/<owner>/<repo>/<run_id>/out`:
state.json, experiments.jsonl, summary.json, via `jobs.ledger`), and the App's run record in
Redis when there is one (state, pull request). Nothing is written; logs, environment, tokens and
settings are never rendered (only the fields below are).

Access: a signed link (itsdangerous, with expiry), minted with
`python -m bot.dashboard link --user LOGIN [--run RUN_ID] [--hours H]`. Opening it sets a signed,
HttpOnly, SameSite=Strict cookie and redirects to the same page without the token. A link names a
GitHub login and either one run (`--run`) or every run; when `AUTORESEARCH_DASHBOARD_USERS` (a
comma-separated allow-list of GitHub logins) is set, only those users' links are honoured, which
also revokes links of anyone removed from it. The signing key is `AUTORESEARCH_DASHBOARD_SECRET`,
or else derived from the App's webhook secret (HMAC with a fixed label), so no extra secret is
required and the webhook secret itself never signs a cookie.
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import math
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from flask import Blueprint, Response, abort, g, jsonify, redirect, render_template_string, request
from itsdangerous import BadSignature, URLSafeSerializer

COOKIE = "autoresearch_dashboard"
LINK_SALT = "autoresearch-dashboard-link"
COOKIE_SALT = "autoresearch-dashboard-cookie"
MAX_COOKIE_SECONDS = 12 * 3600
FINAL_PHASES = {"done", "cancelled", "failed"}
FINAL_STATES = {"done", "failed", "cancelled"}
POLL_MS = 1500


# -- keys and tokens -------------------------------------------------------------------------------
def signing_key(env: dict[str, str] | None = None, webhook_secret: str = "") -> str:
    env = os.environ if env is None else env
    if env.get("AUTORESEARCH_DASHBOARD_SECRET"):
        return env["AUTORESEARCH_DASHBOARD_SECRET"]
    if webhook_secret:
        return hmac.new(webhook_secret.encode(), b"autoresearch-dashboard-v1", hashlib.sha256).hexdigest()
    return ""


def allowed_users(env: dict[str, str] | None = None) -> set[str]:
    env = os.environ if env is None else env
    return {u.strip().lower() for u in env.get("AUTORESEARCH_DASHBOARD_USERS", "").split(",") if u.strip()}


def make_token(key: str, user: str, run: str | None = None, seconds: float = 24 * 3600, now: float | None = None) -> str:
    """A signed link token for `user`, scoped to one run id (or every run when None)."""
    if not key:
        raise ValueError("no dashboard signing key (set AUTORESEARCH_DASHBOARD_SECRET or the webhook secret)")
    exp = int((now or time.time()) + seconds)
    return URLSafeSerializer(key, salt=LINK_SALT).dumps({"u": user, "r": run or "*", "exp": exp})


def read_grant(key: str, token: str, salt: str, users: set[str], now: float | None = None) -> dict | None:
    """The grant a token or cookie carries, or None if forged, expired or revoked."""
    if not key or not token:
        return None
    try:
        data = URLSafeSerializer(key, salt=salt).loads(token)
    except BadSignature:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("u"), str) or not isinstance(data.get("r"), str):
        return None
    if not isinstance(data.get("exp"), int) or data["exp"] <= (now or time.time()):
        return None
    if users and data["u"].lower() not in users:
        return None
    return data


# -- run directories -> a view (pure over the files' contents) -------------------------------------
def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def find_runs(root: Path) -> list[tuple[str, str, Path]]:
    """(repo, run_id, out dir) for every run directory under the workdir, newest first."""
    root = Path(root)
    found = []
    for state in root.glob("*/*/*/out/state.json"):
        out = state.parent
        run_dir = out.parent
        found.append((f"{run_dir.parent.parent.name}/{run_dir.parent.name}", run_dir.name, out,
                      state.stat().st_mtime))
    found.sort(key=lambda t: t[3], reverse=True)
    return [(repo, run_id, out) for repo, run_id, out, _ in found]


def _parallel(out: Path, platforms: list[str]) -> tuple[int, str | None]:
    """Experiments per wave: 1 on this machine; the config's max_vms on cloud machines."""
    from jobs.config import ConfigError, load_config
    try:
        config = load_config(out.parent / "repo")
    except (ConfigError, OSError, ValueError):
        config = None
    primary = config.primary.name if config else None
    if not platforms or platforms == ["local"] or config is None:
        return 1, primary
    return max(1, config.budget.max_vms), primary


def _metric(rec: dict, name: str | None) -> dict | None:
    for m in rec.get("metrics") or []:
        if m.get("name") == name:
            return m
    return None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _cell(rec: dict | None, primary: str | None) -> dict:
    if rec is None:
        return {"status": "pending", "reason": "", "delta_pct": None}
    m = _metric(rec, primary) or {}
    return {"status": rec.get("status", "?"), "reason": str(rec.get("reason", ""))[:300],
            "delta_pct": _num(m.get("delta_pct")), "ci_low_pct": _num(m.get("ci_low_pct")),
            "ci_high_pct": _num(m.get("ci_high_pct")), "p_value": _num(m.get("p_value")),
            "base_mean": _num(m.get("base_mean")), "head_mean": _num(m.get("head_mean")),
            "n": (m.get("n_base"), m.get("n_head")), "seconds": _num(rec.get("seconds")),
            "cost_usd": _num(rec.get("cost_usd"))}


def run_view(repo: str, run_id: str, state: dict, records: list[dict], summary: dict | None = None,
             record: dict | None = None, parallel: int = 1, primary: str | None = None) -> dict:
    """Everything the page shows, as plain data (and nothing else: no logs, no paths)."""
    record = record or {}
    summary = summary or {}
    platforms = list(state.get("platforms") or summary.get("platforms") or ["local"])
    calibration = state.get("calibration") or {}
    primary = summary.get("primary") or primary or next(
        (name for cal in calibration.values() for name in cal), None)
    exps = [r for r in records if r.get("kind", "experiment") == "experiment"]
    by_key = {(r["name"], r["platform"]): r for r in exps}
    names = [h["id"] for h in state.get("hypotheses") or [] if isinstance(h, dict) and "id" in h]
    titles = {h["id"]: h.get("title", "") for h in state.get("hypotheses") or [] if isinstance(h, dict) and "id" in h}
    names += [r["name"] for r in exps if r["name"] not in names]
    experiments = [{"name": n, "title": titles.get(n, ""),
                    "cells": {p: _cell(by_key.get((n, p)), primary) for p in platforms}} for n in names]
    for e in experiments:
        statuses = {c["status"] for c in e["cells"].values()}
        e["done"] = "pending" not in statuses
    stacks = {r["platform"]: _cell(r, primary) for r in records if r.get("kind") == "stack"}
    waves = []
    for i in range(0, len(experiments), max(1, parallel)):
        chunk = experiments[i:i + max(1, parallel)]
        done = all(e["done"] for e in chunk)
        waves.append({"n": len(waves) + 1, "experiments": [e["name"] for e in chunk],
                      "status": "done" if done else "pending"})
    phase = state.get("phase") or "—"
    for w in waves:                     # the first unfinished wave is the one running
        if w["status"] == "pending":
            if phase == "experiments":
                w["status"] = "running"
            break
    run_state = record.get("state") or ("done" if phase == "done" else phase)
    final = phase in FINAL_PHASES or run_state in FINAL_STATES
    cost = _num(state.get("cost_usd")) or 0.0
    cal = {p: {"floor_pct": _num((c.get(primary) or {}).get("floor_pct")),
               "repeats": (c.get(primary) or {}).get("repeats")} for p, c in calibration.items()}
    return {
        "repo": repo, "run_id": run_id, "phase": phase, "state": run_state, "final": final,
        "base_commit": str(state.get("base_commit", ""))[:12], "branch": state.get("branch", ""),
        "agent": state.get("agent", ""), "platforms": platforms, "primary": primary or "",
        "cost_usd": round(cost, 2), "calibration": cal, "experiments": experiments, "stacks": stacks,
        "waves": waves, "parallel": parallel,
        "done": sum(1 for e in experiments if e["done"]), "total": len(experiments),
        "pr_url": record.get("pr_url") or "", "requester": record.get("requester") or "",
        "message": str(record.get("message") or "")[:500],
    }


def load_run(root: Path, run_id: str, repo: str | None = None, store=None) -> dict | None:
    """The view of one run from its directory (and the App's Redis record, if a store is given)."""
    for r, rid, out in find_runs(root):
        if rid != run_id or (repo and r != repo):
            continue
        state = _read_json(out / "state.json") or {}
        from jobs import ledger
        try:
            records = ledger.read(out)
        except ledger.LedgerError:
            records = []
        record = None
        if store is not None:
            try:
                record = store.get_run(r, rid)
            except Exception:           # Redis down: the files still tell the story
                record = None
        parallel, primary = _parallel(out, list(state.get("platforms") or []))
        view = run_view(r, rid, state, records, _read_json(out / "summary.json"), record, parallel, primary)
        view["version"] = hashlib.sha256(json.dumps(view, sort_keys=True, default=str).encode()).hexdigest()[:16]
        return view
    return None


# -- chart (inline SVG geometry; pure) -------------------------------------------------------------
def chart(view: dict) -> dict:
    """Bars of the primary metric's change vs baseline (0 %) per experiment and platform, with CIs."""
    rows = []
    for e in view["experiments"]:
        for p, c in e["cells"].items():
            if c.get("delta_pct") is not None:
                rows.append({"label": e["name"] if len(view["platforms"]) == 1 else f"{e['name']} @ {p}",
                             "delta": c["delta_pct"], "lo": c.get("ci_low_pct"), "hi": c.get("ci_high_pct"),
                             "status": c["status"]})
    for p, c in view["stacks"].items():
        if c.get("delta_pct") is not None:
            rows.append({"label": f"stack @ {p}", "delta": c["delta_pct"], "lo": c.get("ci_low_pct"),
                         "hi": c.get("ci_high_pct"), "status": c["status"]})
    values = [abs(v) for r in rows for v in (r["delta"], r["lo"], r["hi"]) if v is not None]
    span = max([5.0] + values) * 1.15
    width, left, right, row_h, top = 640, 190, 20, 26, 24
    plot = width - left - right
    x = lambda v: left + plot / 2 + (v / span) * (plot / 2)  # noqa: E731
    bars = []
    for i, r in enumerate(rows):
        y = top + i * row_h
        x0, x1 = sorted((x(0), x(r["delta"])))
        bars.append({**r, "y": y, "x": round(x0, 1), "w": round(max(1.0, x1 - x0), 1),
                     "ci": (round(x(r["lo"]), 1), round(x(r["hi"]), 1)) if r["lo"] is not None and r["hi"] is not None else None,
                     "tx": round(x(r["delta"]) + (6 if r["delta"] >= 0 else -6), 1),
                     "anchor": "start" if r["delta"] >= 0 else "end"})
    ticks = [round(span * f, 1) for f in (-1, -0.5, 0, 0.5, 1)]
    return {"bars": bars, "width": width, "height": top + len(rows) * row_h + 30, "left": left,
            "zero": round(x(0), 1), "ticks": [{"v": t, "x": round(x(t * 0.999), 1)} for t in ticks],
            "axis_y": top + len(rows) * row_h + 4, "primary": view["primary"]}


# -- HTML ------------------------------------------------------------------------------------------
BODY = """
<header>
  <h1>run <code>{{ v.run_id }}</code> <small>{{ v.repo }}</small></h1>
  <p class="facts">
    <span class="badge s-{{ v.state }}" id="state">{{ v.state }}</span>
    phase <b id="phase">{{ v.phase }}</b> ·
    experiments <b id="progress">{{ v.done }}/{{ v.total }}</b> ·
    cost so far <b id="cost">{{ '%.2f' % v.cost_usd }} USD</b> ·
    base <code>{{ v.base_commit }}</code> · primary metric <b>{{ v.primary }}</b>
    {% if v.pr_url %} · <a href="{{ v.pr_url }}" rel="noreferrer">pull request</a>{% endif %}
  </p>
  {% if v.message %}<p class="msg">{{ v.message }}</p>{% endif %}
</header>
<section>
  <h2>Waves <small>({{ v.parallel }} experiment(s) at a time per platform)</small></h2>
  <ol class="waves">
  {% for w in v.waves %}<li class="w-{{ w.status }}">wave {{ w.n }}: {{ w.experiments|join(', ') }} — {{ w.status }}</li>
  {% else %}<li>no experiments planned yet (research)</li>{% endfor %}
  </ol>
</section>
<section>
  <h2>Experiments (A/B per platform)</h2>
  <table id="experiments">
    <thead><tr><th>experiment</th>{% for p in v.platforms %}<th>{{ p }}</th>{% endfor %}</tr></thead>
    <tbody>
    {% if v.calibration %}<tr class="cal"><td>calibration (A/A)</td>{% for p in v.platforms %}<td>
      {% set c = v.calibration.get(p) %}{% if c %}noise floor {{ '%.2f' % c.floor_pct if c.floor_pct is not none else '?' }} %, {{ c.repeats }} runs/arm{% else %}pending{% endif %}
    </td>{% endfor %}</tr>{% endif %}
    {% for e in v.experiments %}
      <tr data-name="{{ e.name }}"><td><b>{{ e.name }}</b>{% if e.title %}<br><small>{{ e.title }}</small>{% endif %}</td>
      {% for p in v.platforms %}{% set c = e.cells[p] %}
        <td class="cell"><span class="badge s-{{ c.status }}">{{ c.status }}</span>
        {% if c.delta_pct is not none %} <b>{{ '%+.1f' % c.delta_pct }} %</b>
          {% if c.ci_low_pct is not none and c.ci_high_pct is not none %}<small>[{{ '%+.1f' % c.ci_low_pct }}, {{ '%+.1f' % c.ci_high_pct }}]</small>{% endif %}
          {% if c.p_value is not none %}<small>p={{ '%.3g' % c.p_value }}</small>{% endif %}
          {% if c.base_mean is not none and c.head_mean is not none %}<br><small>A {{ '%.4g' % c.base_mean }} → B {{ '%.4g' % c.head_mean }}</small>{% endif %}
        {% endif %}
        {% if c.reason and c.status != 'keep' %}<br><small class="reason">{{ c.reason }}</small>{% endif %}
        </td>
      {% endfor %}</tr>
    {% endfor %}
    {% if v.stacks %}<tr class="stack"><td><b>stack</b> (kept changes together)</td>{% for p in v.platforms %}{% set c = v.stacks.get(p) %}
      <td>{% if c %}<span class="badge s-{{ c.status }}">{{ c.status }}</span>{% if c.delta_pct is not none %} <b>{{ '%+.1f' % c.delta_pct }} %</b>{% endif %}{% else %}pending{% endif %}</td>{% endfor %}</tr>{% endif %}
    </tbody>
  </table>
</section>
<section>
  <h2>{{ ch.primary }}: change vs baseline per experiment</h2>
  {% if ch.bars %}
  <svg id="chart" role="img" aria-label="{{ ch.primary }} change against the baseline" width="{{ ch.width }}" height="{{ ch.height }}" viewBox="0 0 {{ ch.width }} {{ ch.height }}">
    {% for t in ch.ticks %}<line x1="{{ t.x }}" x2="{{ t.x }}" y1="16" y2="{{ ch.axis_y }}" stroke="#ddd"/>
    <text x="{{ t.x }}" y="{{ ch.axis_y + 16 }}" text-anchor="middle" font-size="11" fill="#555">{{ '%+g' % t.v }}%</text>{% endfor %}
    <line x1="{{ ch.zero }}" x2="{{ ch.zero }}" y1="12" y2="{{ ch.axis_y }}" stroke="#333" stroke-width="1.5"/>
    <text x="{{ ch.zero }}" y="10" text-anchor="middle" font-size="11" fill="#333">baseline</text>
    {% for b in ch.bars %}
      <text x="{{ ch.left - 8 }}" y="{{ b.y + 15 }}" text-anchor="end" font-size="12" fill="#222">{{ b.label }}</text>
      <rect class="bar s-{{ b.status }}" x="{{ b.x }}" y="{{ b.y + 4 }}" width="{{ b.w }}" height="16" rx="2"/>
      {% if b.ci %}<line x1="{{ b.ci[0] }}" x2="{{ b.ci[1] }}" y1="{{ b.y + 12 }}" y2="{{ b.y + 12 }}" stroke="#222"/>{% endif %}
      <text x="{{ b.tx }}" y="{{ b.y + 16 }}" text-anchor="{{ b.anchor }}" font-size="11" fill="#222">{{ '%+.1f' % b.delta }}%</text>
    {% endfor %}
  </svg>
  {% else %}<p>no measured experiments yet</p>{% endif %}
</section>
"""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>autoresearch · {{ title }}</title>
<style nonce="{{ nonce }}">
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1f2328;max-width:1100px}
h1{font-size:20px;margin:0 0 4px} h1 small{font-weight:normal;color:#656d76;font-size:14px}
h2{font-size:15px;margin:22px 0 8px} h2 small{font-weight:normal;color:#656d76}
table{border-collapse:collapse;width:100%} th,td{border:1px solid #d0d7de;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa} tr.cal td{background:#fbfbfb;color:#555} tr.stack td{background:#f3fbf5}
.badge{display:inline-block;padding:0 6px;border-radius:10px;font-size:12px;background:#eaeef2}
.s-keep,.s-done{background:#dafbe1} .s-discard{background:#eaeef2} .s-pending,.s-queued,.s-awaiting_approval{background:#fff8c5}
.s-running,.s-experiments,.s-calibrate,.s-research,.s-stack{background:#ddf4ff}
.s-crash,.s-build_failed,.s-checks_failed,.s-timeout,.s-failed,.s-noise{background:#ffebe9} .s-skipped,.s-cancelled{background:#f6f8fa}
rect.bar{fill:#8c959f} rect.s-keep{fill:#2da44e} rect.s-discard{fill:#8c959f} rect.s-noise{fill:#d4a72c}
.w-running{font-weight:bold} .w-done{color:#1a7f37} .reason{color:#656d76} .msg{background:#f6f8fa;padding:6px 8px}
footer{margin-top:24px;color:#656d76;font-size:12px}
</style></head>
<body>
<main id="run" data-src="{{ src }}" data-version="{{ version }}" data-final="{{ 'true' if final else 'false' }}">{{ body|safe }}</main>
<footer>read-only · {% if live %}<span id="live">live: refreshes while the run goes</span> · {% endif %}updated <span id="updated">{{ updated }}</span> · signed in as {{ user }}</footer>
{% if live %}<script nonce="{{ nonce }}">
(function () {
  var main = document.getElementById('run');
  var version = main.dataset.version, src = main.dataset.src;
  window.__autoresearchPolls = 0;
  function tick() {
    fetch(src, {credentials: 'same-origin', cache: 'no-store'}).then(function (r) {
      if (!r.ok) throw new Error('HTTP ' + r.status);
      return r.json();
    }).then(function (d) {
      window.__autoresearchPolls += 1;
      if (d.version !== version) {
        version = d.version; main.innerHTML = d.html; main.dataset.version = d.version;
        document.getElementById('updated').textContent = new Date().toISOString();
      }
      if (d.final) { document.getElementById('live').textContent = 'finished'; return; }
      setTimeout(tick, {{ poll_ms }});
    }).catch(function () { setTimeout(tick, {{ poll_ms * 2 }}); });
  }
  if (main.dataset.final !== 'true') setTimeout(tick, {{ poll_ms }});
})();
</script>{% endif %}
</body></html>
"""

LIST = """
<h1>autoresearch runs</h1>
<table id="runs"><thead><tr><th>run</th><th>repository</th><th>state</th><th>phase</th><th>experiments</th><th>cost so far</th></tr></thead>
<tbody>{% for v in runs %}<tr><td><a href="{{ v.href }}">{{ v.run_id }}</a></td><td>{{ v.repo }}</td>
<td><span class="badge s-{{ v.state }}">{{ v.state }}</span></td><td>{{ v.phase }}</td><td>{{ v.done }}/{{ v.total }}</td>
<td>{{ '%.2f' % v.cost_usd }} USD</td></tr>{% else %}<tr><td colspan="6">no runs you may see</td></tr>{% endfor %}</tbody></table>
"""


def blueprint(settings=None, *, root: Path | None = None, store=None, env: dict[str, str] | None = None) -> Blueprint:
    """The dashboard for the App (`settings`: workdir, Redis, webhook secret) or any run root."""
    env = dict(os.environ if env is None else env)
    root = Path(root or settings.workdir)
    key = signing_key(env, getattr(settings, "webhook_secret", ""))
    users = allowed_users(env)
    if store is None and settings is not None and getattr(settings, "redis_url", ""):
        from .store import Store, connect
        store = Store(connect(settings.redis_url))
    bp = Blueprint("dashboard", __name__)

    def deny(status: int, why: str):
        body = render_template_string(PAGE, title="access", body=f"<h1>{why}</h1><p>Ask a maintainer for a signed "
                                      "dashboard link (<code>python -m bot.dashboard link</code>).</p>",
                                      nonce=g.nonce, src="", version="", final=True, live=False,
                                      updated="", user="nobody", poll_ms=POLL_MS)
        return Response(body, status, mimetype="text/html")

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
            cookie_exp = min(grant["exp"], int(time.time()) + MAX_COOKIE_SECONDS)
            value = URLSafeSerializer(key, salt=COOKIE_SALT).dumps({**grant, "exp": cookie_exp})
            rest = [(k, v) for k, v in request.args.items(multi=True) if k != "token"]
            query = "&".join(f"{quote(k)}={quote(v)}" for k, v in rest)
            resp = redirect(request.path + (f"?{query}" if query else ""), code=303)
            resp.set_cookie(COOKIE, value, max_age=cookie_exp - int(time.time()), httponly=True,
                            samesite="Strict", secure=request.is_secure, path="/runs")
            return resp
        grant = read_grant(key, request.cookies.get(COOKIE, ""), COOKIE_SALT, users)
        if grant is None:
            return deny(401, "Sign in with a dashboard link to see runs.")
        g.grant = grant

    @bp.after_request
    def headers(resp):
        resp.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'nonce-{g.get('nonce', '')}'; style-src 'nonce-{g.get('nonce', '')}'; "
            "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
        resp.headers["Cache-Control"] = "no-store"
        resp.headers["Referrer-Policy"] = "no-referrer"
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["X-Frame-Options"] = "DENY"
        return resp

    def may_see(run_id: str) -> bool:
        return g.grant["r"] in ("*", run_id)

    def one(run_id: str) -> dict:
        if not may_see(run_id):
            abort(404)
        view = load_run(root, run_id, request.args.get("repo") or None, store)
        if view is None:
            abort(404)
        return view

    def body(view: dict) -> str:
        return render_template_string(BODY, v=view, ch=chart(view))

    @bp.get("/runs")
    def runs():
        views = []
        for repo, run_id, _ in find_runs(root):
            if may_see(run_id):
                v = load_run(root, run_id, repo, store)
                if v:
                    v["href"] = f"/runs/{run_id}?repo={repo}"
                    views.append(v)
        html = render_template_string(LIST, runs=views)
        return render_template_string(PAGE, title="runs", body=html, nonce=g.nonce, src="", version="",
                                      final=True, live=False, updated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                      user=g.grant["u"], poll_ms=POLL_MS)

    @bp.get("/runs/<run_id>.json")
    def run_json(run_id: str):
        view = one(run_id)
        return jsonify(version=view["version"], final=view["final"], html=body(view), run=view)

    @bp.get("/runs/<run_id>")
    def run_page(run_id: str):
        view = one(run_id)
        src = f"/runs/{run_id}.json" + (f"?repo={request.args['repo']}" if request.args.get("repo") else "")
        return render_template_string(PAGE, title=run_id, body=body(view), nonce=g.nonce, src=src,
                                      version=view["version"], final=view["final"], live=True,
                                      updated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                      user=g.grant["u"], poll_ms=POLL_MS)

    return bp


def main(argv: list[str] | None = None) -> int:
    """`python -m bot.dashboard link --user LOGIN [--run RUN_ID] [--hours H] [--base-url URL]`"""
    parser = argparse.ArgumentParser(prog="python -m bot.dashboard")
    sub = parser.add_subparsers(dest="cmd", required=True)
    link = sub.add_parser("link", help="print a signed dashboard link")
    link.add_argument("--user", required=True, help="the GitHub login the link is for")
    link.add_argument("--run", help="only this run id (default: every run)")
    link.add_argument("--hours", type=float, default=24.0)
    link.add_argument("--base-url", default="http://127.0.0.1:8000")
    args = parser.parse_args(argv)
    key = signing_key(webhook_secret=os.environ.get("AUTORESEARCH_WEBHOOK_SECRET", ""))
    users = allowed_users()
    if users and args.user.lower() not in users:
        print(f"{args.user} is not in AUTORESEARCH_DASHBOARD_USERS; the link would be refused", file=sys.stderr)
        return 2
    try:
        token = make_token(key, args.user, args.run, args.hours * 3600)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    path = f"/runs/{args.run}" if args.run else "/runs"
    print(f"{args.base_url.rstrip('/')}{path}?token={token}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
