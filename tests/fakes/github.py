"""A fake GitHub REST API on loopback: exactly the endpoints bot/github.py uses.
Every response is checked against GitHub's OpenAPI description (`fakes.openapi`, `@octokit/openapi`
from npm); the bot tests fail on any that does not conform (`violations`).

A real HTTP server (werkzeug, in a thread) whose responses are shaped like GitHub's, so
githubkit's response models accept them. Repositories are local bare git repos under
`git_root/<owner>/<repo>.git` (the bot clones and pushes them through `file://` URLs); refs,
file contents and pull-request heads are read from those repos with real git.

Auth is checked like GitHub does it: the app endpoint needs an RS256 JWT signed by the App's
private key (iss = app id); the repository endpoints need an installation token it issued.
"""
from __future__ import annotations

import base64
import itertools
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jwt
from flask import Flask, g, jsonify, request
from werkzeug.serving import make_server

API = "https://api.github.com"
WEB = "https://github.com"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def user_json(login: str, uid: int, kind: str = "User") -> dict[str, Any]:
    quoted = quote(login)                     # GitHub's own: /users/dependabot%5Bbot%5D
    u = f"{API}/users/{quoted}"
    return {"login": login, "id": uid, "node_id": f"U_{uid}", "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
            "gravatar_id": "", "url": u, "html_url": f"{WEB}/{quoted}", "followers_url": f"{u}/followers",
            "following_url": f"{u}/following{{/other_user}}", "gists_url": f"{u}/gists{{/gist_id}}",
            "starred_url": f"{u}/starred{{/owner}}{{/repo}}", "subscriptions_url": f"{u}/subscriptions",
            "organizations_url": f"{u}/orgs", "repos_url": f"{u}/repos", "events_url": f"{u}/events{{/privacy}}",
            "received_events_url": f"{u}/received_events", "type": kind, "site_admin": False}


def repo_json(full: str, rid: int, owner: dict, default_branch: str) -> dict[str, Any]:
    u = f"{API}/repos/{full}"
    urls = {f"{k}_url": f"{u}/{v}" for k, v in {
        "archive": "{archive_format}{/ref}", "assignees": "assignees{/user}", "blobs": "git/blobs{/sha}",
        "branches": "branches{/branch}", "collaborators": "collaborators{/collaborator}",
        "comments": "comments{/number}", "commits": "commits{/sha}", "compare": "compare/{base}...{head}",
        "contents": "contents/{+path}", "contributors": "contributors", "deployments": "deployments",
        "downloads": "downloads", "events": "events", "forks": "forks", "git_commits": "git/commits{/sha}",
        "git_refs": "git/refs{/sha}", "git_tags": "git/tags{/sha}", "issue_comment": "issues/comments{/number}",
        "issue_events": "issues/events{/number}", "issues": "issues{/number}", "keys": "keys{/key_id}",
        "labels": "labels{/name}", "languages": "languages", "merges": "merges",
        "milestones": "milestones{/number}", "notifications": "notifications{?since,all,participating}",
        "pulls": "pulls{/number}", "releases": "releases{/id}", "stargazers": "stargazers",
        "statuses": "statuses/{sha}", "subscribers": "subscribers", "subscription": "subscription",
        "tags": "tags", "teams": "teams", "trees": "git/trees{/sha}", "hooks": "hooks"}.items()}
    return {"id": rid, "node_id": f"R_{rid}", "name": full.split("/")[1], "full_name": full, "license": None,
            "forks": 0, "owner": owner, "private": False, "html_url": f"{WEB}/{full}", "description": None,
            "fork": False, "url": u, **urls, "git_url": f"git://github.com/{full}.git",
            "ssh_url": f"git@github.com:{full}.git", "clone_url": f"{WEB}/{full}.git", "mirror_url": None,
            "svn_url": f"{WEB}/{full}", "homepage": None, "language": "C", "forks_count": 0,
            "stargazers_count": 0, "watchers_count": 0, "size": 1, "default_branch": default_branch,
            "open_issues_count": 0, "has_pages": False, "disabled": False, "pushed_at": _now(),
            "has_issues": True, "has_projects": False, "has_wiki": False, "has_downloads": False,
            "has_discussions": False, "archived": False, "visibility": "public",
            "created_at": _now(), "updated_at": _now(), "open_issues": 0, "watchers": 0}


@dataclass
class FakeRepo:
    full: str
    rid: int
    bare: Path
    default_branch: str = "main"
    permissions: dict[str, tuple[str, str]] = field(default_factory=dict)   # login -> (permission, role)


class FakeGitHub:
    def __init__(self, git_root: Path, app_id: str, public_key_pem: str, bot_login: str = "autoresearch-test[bot]"):
        self.git_root = Path(git_root)
        self.app_id, self.public_key = str(app_id), public_key_pem
        self.bot_login = bot_login
        self.repos: dict[str, FakeRepo] = {}
        self.users: dict[str, dict] = {}
        self.comments: dict[int, dict] = {}           # id -> {repo, issue, body, login, created_at, updated_at}
        self.reactions: list[dict] = []
        self.pulls: dict[tuple[str, int], dict] = {}
        self.tokens: dict[str, int] = {}              # issued token -> installation id
        self.log: list[tuple[str, str, int]] = []     # (method, path, status)
        self.faults: dict[tuple[str, str], int] = {}  # (method, path) -> status to answer instead (an outage)
        self.validate = True                          # check every response against GitHub's OpenAPI description
        self.violations: list[str] = []               # ... and what did not conform
        self.workflow_runs: dict[tuple[str, int], str] = {}   # (repo, run id) -> status; unknown = completed
        self.cancelled_runs: list[tuple[str, int]] = []       # (repo, workflow run id) cancelled
        self.foreign_edits: list[dict] = []           # comments of others the bot edited (must stay empty)
        self.lock = threading.RLock()
        self._ids = itertools.count(1000)
        self._numbers: dict[str, itertools.count] = {}
        self.app = self._make_app()
        self._server = None

    # -- state helpers for tests ------------------------------------------------------------------
    def next_id(self) -> int:
        with self.lock:
            return next(self._ids)

    def user(self, login: str) -> dict:
        with self.lock:
            if login not in self.users:
                kind = "Bot" if login.endswith("[bot]") else "User"
                self.users[login] = user_json(login, self.next_id(), kind)
            return self.users[login]

    def add_repo(self, full: str, bare: Path, default_branch: str = "main") -> FakeRepo:
        repo = FakeRepo(full, self.next_id(), Path(bare), default_branch)
        self.repos[full] = repo
        self._numbers[full] = itertools.count(100)     # PR numbers; tests use issues below 100
        return repo

    def new_issue_number(self, full: str) -> int:
        return next(self._numbers[full])

    def add_pull(self, full: str, head: str, base: str, title: str, body: str, author: str) -> int:
        """A pull request opened by `author` (a person, not the bot) from branch `head` of `full`."""
        repo = self.repos[full]
        with self.lock:
            number = self.new_issue_number(full)
            self.pulls[(full, number)] = {"id": self.next_id(), "title": title, "head": head, "base": base,
                                          "body": body, "draft": False, "head_repo": None, "author": author,
                                          "head_sha": self.git(repo.bare, "rev-parse", f"refs/heads/{head}"),
                                          "created_at": _now(), "updated_at": _now()}
        return number

    def add_comment(self, full: str, issue: int, login: str, body: str) -> dict:
        with self.lock:
            cid = self.next_id()
            self.comments[cid] = {"repo": full, "issue": issue, "body": body, "login": login,
                                  "created_at": _now(), "updated_at": _now()}
            return self.comment_json(cid)

    def issue_comments(self, full: str, issue: int) -> list[dict]:
        with self.lock:
            return [dict(c, id=i) for i, c in sorted(self.comments.items())
                    if c["repo"] == full and c["issue"] == issue]

    def repo_json(self, full: str) -> dict:
        r = self.repos[full]
        return repo_json(full, r.rid, self.user(full.split("/")[0]), r.default_branch)

    def comment_json(self, cid: int) -> dict:
        c = self.comments[cid]
        base = f"{API}/repos/{c['repo']}"
        return {"id": cid, "node_id": f"IC_{cid}", "url": f"{base}/issues/comments/{cid}",
                "html_url": f"{WEB}/{c['repo']}/issues/{c['issue']}#issuecomment-{cid}", "body": c["body"],
                "user": self.user(c["login"]), "created_at": c["created_at"], "updated_at": c["updated_at"],
                "issue_url": f"{base}/issues/{c['issue']}", "author_association": "NONE"}

    def git(self, bare: Path, *args: str, check: bool = True) -> str:
        p = subprocess.run(["git", "-C", str(bare), *args], capture_output=True, text=True)
        if check and p.returncode:
            raise LookupError(p.stderr)
        return p.stdout.strip() if p.returncode == 0 else ""

    def pull_json(self, key: tuple[str, int]) -> dict:
        p = self.pulls[key]
        full, number = key
        repo = self.repos[full]
        base = f"{API}/repos/{full}"
        head_owner, _, head_ref = p["head"].rpartition(":")
        head_full = p.get("head_repo") or (f"{head_owner}/{full.split('/')[1]}" if head_owner else full)
        head_bare = self.git_root / f"{head_full}.git"
        head_sha = self.git(head_bare, "rev-parse", f"refs/heads/{head_ref}", check=False) or p["head_sha"]
        base_sha = self.git(repo.bare, "rev-parse", f"refs/heads/{p['base']}")
        link = lambda href: {"href": href}  # noqa: E731
        owner_user = self.user(full.split("/")[0])
        head_user = self.user(head_full.split("/")[0])
        head_repo = repo_json(head_full, self.repos[head_full].rid if head_full in self.repos else repo.rid + 1,
                              head_user, repo.default_branch)
        return {
            "url": f"{base}/pulls/{number}", "id": p["id"], "node_id": f"PR_{p['id']}",
            "html_url": f"{WEB}/{full}/pull/{number}", "diff_url": f"{WEB}/{full}/pull/{number}.diff",
            "patch_url": f"{WEB}/{full}/pull/{number}.patch", "issue_url": f"{base}/issues/{number}",
            "commits_url": f"{base}/pulls/{number}/commits",
            "review_comments_url": f"{base}/pulls/{number}/comments",
            "review_comment_url": f"{base}/pulls/comments{{/number}}", "comments_url": f"{base}/issues/{number}/comments",
            "statuses_url": f"{base}/statuses/{head_sha}", "number": number, "state": "open", "locked": False,
            "title": p["title"], "user": self.user(p.get("author") or self.bot_login), "body": p["body"], "labels": p.get("labels", []),
            "milestone": None, "active_lock_reason": None, "created_at": p["created_at"], "updated_at": p["updated_at"],
            "closed_at": None, "merged_at": None, "merge_commit_sha": None, "assignee": None, "assignees": [],
            "requested_reviewers": [], "requested_teams": [],
            "head": {"label": f"{head_full.split('/')[0]}:{head_ref}", "ref": head_ref, "sha": head_sha,
                     "user": head_user, "repo": head_repo},
            "base": {"label": f"{full.split('/')[0]}:{p['base']}", "ref": p["base"], "sha": base_sha,
                     "user": owner_user, "repo": self.repo_json(full)},
            "_links": {"self": link(f"{base}/pulls/{number}"), "html": link(f"{WEB}/{full}/pull/{number}"),
                       "issue": link(f"{base}/issues/{number}"), "comments": link(f"{base}/issues/{number}/comments"),
                       "review_comments": link(f"{base}/pulls/{number}/comments"),
                       "review_comment": link(f"{base}/pulls/comments{{/number}}"),
                       "commits": link(f"{base}/pulls/{number}/commits"), "statuses": link(f"{base}/statuses/{head_sha}")},
            "author_association": "NONE", "auto_merge": None, "draft": p["draft"], "merged": False,
            "mergeable": None, "rebaseable": None, "mergeable_state": "unknown", "merged_by": None, "comments": 0,
            "review_comments": 0, "maintainer_can_modify": False, "commits": 1, "additions": 1, "deletions": 1,
            "changed_files": 1,
        }

    # -- the HTTP API ------------------------------------------------------------------------------
    def _make_app(self) -> Flask:
        app = Flask("fake-github")

        def error(status: int, message: str):
            return jsonify(message=message, documentation_url="https://docs.github.com/rest",
                           status=str(status)), status

        def installation_auth() -> bool:
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            return scheme.lower() in ("token", "bearer") and token in self.tokens

        def repo_or_404(owner: str, name: str) -> FakeRepo | None:
            return self.repos.get(f"{owner}/{name}")

        @app.before_request
        def check_auth():
            fault = self.faults.get((request.method, request.path))
            if fault:
                g.fault = True          # an outage answers outside the description, as GitHub's do
                return error(fault, "Server Error")
            if request.path.startswith("/app/"):
                scheme, _, token = request.headers.get("Authorization", "").partition(" ")
                try:
                    claims = jwt.decode(token, self.public_key, algorithms=["RS256"])
                except jwt.PyJWTError as exc:
                    return error(401, f"A JSON web token could not be decoded ({exc})")
                if str(claims.get("iss")) != self.app_id:
                    return error(401, "'Issuer' claim ('iss') must be an Integer")
                return None
            if not installation_auth():
                return error(401, "Bad credentials")
            return None

        @app.after_request
        def record(resp):
            self.log.append((request.method, request.path, resp.status_code))
            if self.validate and not g.get("fault"):
                from .openapi import violations
                self.violations += violations(request.method, request.path, request.args.to_dict(),
                                              resp.status_code, resp.get_data(), resp.mimetype,
                                              dict(resp.headers))
            return resp

        @app.post("/app/installations/<int:installation_id>/access_tokens")
        def access_token(installation_id):
            token = f"ghs_fake{self.next_id()}x{installation_id}"
            self.tokens[token] = installation_id
            return jsonify(token=token, expires_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600)),
                           permissions={"issues": "write", "contents": "write", "pull_requests": "write"},
                           repository_selection="all"), 201

        @app.post("/repos/<owner>/<name>/issues/comments/<int:cid>/reactions")
        def react(owner, name, cid):
            if not repo_or_404(owner, name) or cid not in self.comments:
                return error(404, "Not Found")
            content = (request.get_json(silent=True) or {}).get("content")
            if content not in ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"):
                return error(422, "Validation Failed")
            rid = self.next_id()
            self.reactions.append({"comment_id": cid, "content": content, "user": self.bot_login})
            return jsonify(id=rid, node_id=f"REA_{rid}", user=self.user(self.bot_login), content=content,
                           created_at=_now()), 201

        @app.post("/repos/<owner>/<name>/issues/<int:number>/comments")
        def create_comment(owner, name, number):
            if not repo_or_404(owner, name):
                return error(404, "Not Found")
            body = (request.get_json(silent=True) or {}).get("body")
            if not isinstance(body, str) or not body:
                return error(422, "Validation Failed")
            if len(body) > 65536:
                return error(422, "Body is too long (maximum is 65536 characters)")
            return jsonify(self.add_comment(f"{owner}/{name}", number, self.bot_login, body)), 201

        @app.get("/repos/<owner>/<name>/issues/<int:number>/comments")
        def list_comments(owner, name, number):
            if not repo_or_404(owner, name):
                return error(404, "Not Found")
            per_page = min(int(request.args.get("per_page", 30)), 100)
            page = int(request.args.get("page", 1))
            items = self.issue_comments(f"{owner}/{name}", number)[(page - 1) * per_page: page * per_page]
            return jsonify([self.comment_json(c["id"]) for c in items])

        @app.patch("/repos/<owner>/<name>/issues/comments/<int:cid>")
        def update_comment(owner, name, cid):
            c = self.comments.get(cid)
            if not repo_or_404(owner, name) or not c or c["repo"] != f"{owner}/{name}":
                return error(404, "Not Found")
            if c["login"] != self.bot_login:
                # GitHub lets an installation with issues: write (and a workflow token) edit anyone's
                # comment; the fake does too, and keeps what it overwrote as the attack's evidence.
                self.foreign_edits.append({"id": cid, "login": c["login"], "was": c["body"]})
            body = (request.get_json(silent=True) or {}).get("body")
            if not isinstance(body, str) or not body:
                return error(422, "Validation Failed")
            with self.lock:
                c.update(body=body, updated_at=_now())
            return jsonify(self.comment_json(cid))

        @app.get("/repos/<owner>/<name>/collaborators/<username>/permission")
        def permission(owner, name, username):
            repo = repo_or_404(owner, name)
            if not repo:
                return error(404, "Not Found")
            perm, role = repo.permissions.get(username, ("read", "read"))
            user = dict(self.user(username), role_name=role,
                        permissions={"admin": perm == "admin", "maintain": role in ("admin", "maintain"),
                                     "push": perm in ("admin", "write"), "triage": True, "pull": True})
            return jsonify(permission=perm, role_name=role, user=user)

        @app.get("/repos/<owner>/<name>/git/ref/<path:ref>")
        def get_ref(owner, name, ref):
            repo = repo_or_404(owner, name)
            sha = self.git(repo.bare, "rev-parse", "--verify", "-q", f"refs/{ref}", check=False) if repo else ""
            if not sha:
                return error(404, "Not Found")
            return jsonify(ref=f"refs/{ref}", node_id=f"REF_{sha[:8]}", url=f"{API}/repos/{owner}/{name}/git/refs/{ref}",
                           object={"type": "commit", "sha": sha, "url": f"{API}/repos/{owner}/{name}/git/commits/{sha}"})

        @app.get("/repos/<owner>/<name>/contents/<path:path>")
        def contents(owner, name, path):
            repo = repo_or_404(owner, name)
            if not repo:
                return error(404, "Not Found")
            ref = request.args.get("ref") or repo.default_branch
            kind = self.git(repo.bare, "cat-file", "-t", f"{ref}:{path}", check=False)
            if kind != "blob":
                return error(404, "Not Found")
            data = subprocess.run(["git", "-C", str(repo.bare), "show", f"{ref}:{path}"], capture_output=True).stdout
            sha = self.git(repo.bare, "rev-parse", f"{ref}:{path}")
            u = f"{API}/repos/{owner}/{name}/contents/{path}?ref={ref}"
            html = f"{WEB}/{owner}/{name}/blob/{ref}/{path}"
            git_url = f"{API}/repos/{owner}/{name}/git/blobs/{sha}"
            return jsonify(type="file", encoding="base64", size=len(data), name=path.rsplit("/", 1)[-1], path=path,
                           content=base64.encodebytes(data).decode(), sha=sha, url=u, git_url=git_url,
                           html_url=html, download_url=f"https://raw.githubusercontent.com/{owner}/{name}/{ref}/{path}",
                           _links={"self": u, "git": git_url, "html": html})

        @app.post("/repos/<owner>/<name>/pulls")
        def create_pull(owner, name):
            full = f"{owner}/{name}"
            repo = repo_or_404(owner, name)
            data = request.get_json(silent=True) or {}
            if not repo or not all(isinstance(data.get(k), str) for k in ("title", "head", "base")):
                return error(404 if not repo else 422, "Validation Failed")
            head_owner, _, head_ref = data["head"].rpartition(":")
            head_repo = data.get("head_repo") if isinstance(data.get("head_repo"), str) else None
            head_bare = self.git_root / f"{head_repo or f'{head_owner or owner}/{name}'}.git"
            head_sha = self.git(head_bare, "rev-parse", "--verify", "-q", f"refs/heads/{head_ref}", check=False)
            base_sha = self.git(repo.bare, "rev-parse", "--verify", "-q", f"refs/heads/{data['base']}", check=False)
            if not head_sha or not base_sha:
                return error(422, "Validation Failed: head or base not found")
            with self.lock:
                if any(k[0] == full and p["head"] == data["head"] for k, p in self.pulls.items()):
                    return error(422, f"A pull request already exists for {data['head']}.")
                number = self.new_issue_number(full)
                self.pulls[(full, number)] = {"id": self.next_id(), "title": data["title"], "head": data["head"],
                                              "base": data["base"], "body": data.get("body"),
                                              "draft": bool(data.get("draft")), "head_sha": head_sha,
                                              "head_repo": head_repo,
                                              "created_at": _now(), "updated_at": _now()}
            return jsonify(self.pull_json((full, number))), 201

        @app.get("/repos/<owner>/<name>/pulls/<int:number>")
        def get_pull(owner, name, number):
            if (f"{owner}/{name}", number) not in self.pulls:
                return error(404, "Not Found")
            return jsonify(self.pull_json((f"{owner}/{name}", number)))

        @app.patch("/repos/<owner>/<name>/pulls/<int:number>")
        def update_pull(owner, name, number):
            p = self.pulls.get((f"{owner}/{name}", number))
            if not p:
                return error(404, "Not Found")
            data = request.get_json(silent=True) or {}
            with self.lock:
                for k in ("title", "body"):
                    if isinstance(data.get(k), str):
                        p[k] = data[k]
                p["updated_at"] = _now()
            return jsonify(self.pull_json((f"{owner}/{name}", number)))

        @app.post("/repos/<owner>/<name>/actions/runs/<int:run_id>/cancel")
        def cancel_workflow_run(owner, name, run_id):
            # https://docs.github.com/en/rest/actions/workflow-runs#cancel-a-workflow-run: 202 {}
            if not repo_or_404(owner, name):
                return error(404, "Not Found")
            key = (f"{owner}/{name}", run_id)
            if self.workflow_runs.get(key) not in ("queued", "in_progress"):
                return error(409, "Cannot cancel a workflow run that is completed.")
            self.workflow_runs[key] = "completed"
            self.cancelled_runs.append(key)
            return jsonify({}), 202

        @app.errorhandler(404)
        def not_found(_):
            return error(404, "Not Found")

        return app

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self, port: int = 0) -> str:
        self._server = make_server("127.0.0.1", port, self.app, threaded=True)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_port}"

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
