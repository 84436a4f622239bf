"""Who may see the dashboard: signed links and cookies (itsdangerous), with expiry and an allow-list.

A link token names a GitHub login, one repository (`owner/name`, or `*`: every repository) and one
run id of it (or `*`: every run of it), and expires: run ids repeat across repositories
(`<issue>-<base7>`), so a grant for run R of repository A never shows run R of repository B, and a
run-scoped grant always names its repository. Tokens of the older form (a run id without a
repository) are refused. Opening a link sets a cookie carrying the same grant (at most `MAX_COOKIE_SECONDS`), under another salt, so a cookie is
never a link and a link never a cookie. When `AUTORESEARCH_DASHBOARD_USERS` (comma-separated
logins) is set, only those users' grants are honoured, which also revokes the links of anyone
removed from it. The signing key is `AUTORESEARCH_DASHBOARD_SECRET`, or else derived from the App's
webhook secret (HMAC with a fixed label), so the webhook secret itself never signs a cookie.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections.abc import Mapping

from itsdangerous import BadSignature, URLSafeSerializer

COOKIE = "autoresearch_dashboard"
LINK_SALT = "autoresearch-dashboard-link"
COOKIE_SALT = "autoresearch-dashboard-cookie"
MAX_COOKIE_SECONDS = 12 * 3600


def signing_key(env: Mapping[str, str] | None = None, webhook_secret: str = "") -> str:
    env = os.environ if env is None else env
    if env.get("AUTORESEARCH_DASHBOARD_SECRET"):
        return env["AUTORESEARCH_DASHBOARD_SECRET"]
    if webhook_secret:
        return hmac.new(webhook_secret.encode(), b"autoresearch-dashboard-v1", hashlib.sha256).hexdigest()
    return ""


def allowed_users(env: Mapping[str, str] | None = None) -> set[str]:
    env = os.environ if env is None else env
    return {u.strip().lower() for u in env.get("AUTORESEARCH_DASHBOARD_USERS", "").split(",") if u.strip()}


def make_token(key: str, user: str, run: str | None = None, seconds: float = 24 * 3600, now: float | None = None,
               repo: str | None = None) -> str:
    """A signed link token for `user`, scoped to `repo` (owner/name; None: every repository) and
    one run id of it (None: every run). A run needs its repository."""
    if not key:
        raise ValueError("no dashboard signing key (set AUTORESEARCH_DASHBOARD_SECRET or the webhook secret)")
    if run and not repo:
        raise ValueError("a link for one run names its repository too (--repo owner/name): run ids repeat "
                         "across repositories")
    if repo and (repo.count("/") != 1 or not all(repo.split("/"))):
        raise ValueError(f"repository {repo!r} is not owner/name")
    exp = int((now or time.time()) + seconds)
    return URLSafeSerializer(key, salt=LINK_SALT).dumps({"u": user, "p": repo or "*", "r": run or "*", "exp": exp})


def read_grant(key: str, token: str, salt: str, users: set[str], now: float | None = None) -> dict | None:
    """The grant a token or cookie carries, or None if forged, expired or revoked."""
    if not key or not token:
        return None
    try:
        data = URLSafeSerializer(key, salt=salt).loads(token)
    except BadSignature:
        return None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("u", "p", "r")):
        return None
    if data["r"] != "*" and data["p"] == "*":
        return None
    if not isinstance(data.get("exp"), int) or data["exp"] <= (now or time.time()):
        return None
    if users and data["u"].lower() not in users:
        return None
    return data


def cookie_for(key: str, grant: dict, now: float | None = None) -> tuple[str, int]:
    """The cookie value for a link's grant, and its lifetime in seconds."""
    now = int(now or time.time())
    exp = min(grant["exp"], now + MAX_COOKIE_SECONDS)
    return URLSafeSerializer(key, salt=COOKIE_SALT).dumps({**grant, "exp": exp}), exp - now


def may_see(grant: dict, repo: str, run_id: str) -> bool:
    """Does the grant cover run `run_id` of repository `repo` (owner/name)?"""
    return grant["p"] in ("*", repo) and grant["r"] in ("*", run_id)
