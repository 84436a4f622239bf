"""GitHub REST adapter (githubkit). Exactly the endpoints the bot uses, nothing else.

Responses are read through githubkit's `.parsed_data`, which validates them against GitHub's
schema, except pull requests: githubkit's pull-request model demands fields GitHub's OpenAPI
description does not require (e.g. `labels[].archived_by`), so a valid response could fail there;
the few fields used are read from the JSON (`_pull`). The `GitHub` client object is kept alive on
the adapter while responses are in use.

A comment is found again only among the bot's own comments (author = `Settings.bot_login`: the
App's `<slug>[bot]`, the Action's `github-actions[bot]`), never by its hidden marker alone: anyone
can post a marker first, and the bot must neither edit their comment (GitHub would let it) nor be
stuck on it. Without a configured login the App never searches: it edits the comment id it
stored, else posts a new comment.

Endpoints (https://docs.github.com/en/rest):
- POST  /app/installations/{id}/access_tokens            installation token (git clone/push)
- POST  /repos/{o}/{r}/issues/comments/{id}/reactions    👀 on receipt
- POST  /repos/{o}/{r}/issues/{n}/comments               replies, plan and status comments
- GET   /repos/{o}/{r}/issues/{n}/comments               find the sticky status comment: the bot's own, by marker
- PATCH /repos/{o}/{r}/issues/comments/{id}              edit the status comment in place
- GET   /repos/{o}/{r}/collaborators/{user}/permission   who may start spending
- GET   /repos/{o}/{r}/git/ref/heads/{branch}            the base commit
- GET   /repos/{o}/{r}/contents/{path}?ref=              .github/autoresearch.yml
- POST  /repos/{o}/{r}/pulls, PATCH /repos/{o}/{r}/pulls/{n}, GET /repos/{o}/{r}/pulls/{n}
and two the Action uses (`RepoClient.for_token`, authenticated with the workflow's token):
- GET   /repos/{o}/{r}/issues/{n}/comments               its state comment, by author and marker
- POST  /repos/{o}/{r}/actions/runs/{id}/cancel          `cancel` of a running run
  (https://docs.github.com/en/rest/actions/workflow-runs#cancel-a-workflow-run)
"""
from __future__ import annotations

import base64
from dataclasses import dataclass

from githubkit import AppAuthStrategy, AppInstallationAuthStrategy, GitHub, TokenAuthStrategy
from githubkit.cache import MemCacheStrategy
from githubkit.exception import RequestFailed
from githubkit.retry import RetryChainDecision, RetryRateLimit, RetryServerError

from .settings import Settings


@dataclass(frozen=True)
class PullInfo:
    number: int
    url: str
    head_ref: str
    head_sha: str
    base_ref: str
    base_sha: str
    author: str
    head_repo: str              # owner/name of the repository the head branch lives in


def _pull(data: dict) -> PullInfo:
    """The fields we use of a pull-request response, read leniently (see the module docstring).
    A head repository that was deleted is `null`: the head then counts as the base repository's."""
    head, base = data["head"], data["base"]
    head_repo = (head.get("repo") or base["repo"])["full_name"]
    return PullInfo(data["number"], data["html_url"], head["ref"], head["sha"], base["ref"], base["sha"],
                    (data.get("user") or {}).get("login", ""), head_repo)


# One quick in-process retry of a 5xx (after 1 s), then the error reaches the job: the command
# queue retries it (bot/jobqueue.py) and the commenter is told so. githubkit's default (three
# retries after 1, 4 and 9 s) held a worker 14 s per request in an outage before anyone heard of it.
RETRIES = RetryChainDecision(RetryRateLimit(), RetryServerError(max_retry=1))


def _client(auth, settings: Settings) -> GitHub:
    # A token cache per client (not githubkit's process-wide default): a token is never reused
    # across API bases or apps, and a job's tokens die with the job.
    return GitHub(auth, base_url=settings.api_url, http_cache=False, timeout=30,
                  user_agent="autoresearch-bot", cache_strategy=MemCacheStrategy(), auto_retry=RETRIES)


def installation_token(settings: Settings, installation_id: int) -> str:
    """A fresh installation access token (for git over HTTPS). Never logged, never stored."""
    gh = _client(AppAuthStrategy(settings.app_id, settings.private_key()), settings)
    resp = gh.rest.apps.create_installation_access_token(installation_id)
    return resp.parsed_data.token


class RepoClient:
    """One repository, acting as one installation of the App (tokens are refreshed by githubkit),
    or, made by `for_token`, as the holder of a workflow's token (the Action)."""

    def __init__(self, settings: Settings, installation_id: int, owner: str, repo: str, *, auth=None):
        self.settings = settings
        self.owner, self.repo = owner, repo
        self.bot_login = settings.bot_login      # whose comments and pull requests are the bot's
        self.gh = _client(auth or AppInstallationAuthStrategy(settings.app_id, settings.private_key(), installation_id),
                          settings)

    @classmethod
    def for_token(cls, settings: Settings, token: str, owner: str, repo: str) -> "RepoClient":
        return cls(settings, 0, owner, repo, auth=TokenAuthStrategy(token))

    def react(self, comment_id: int, content: str = "eyes") -> None:
        resp = self.gh.rest.reactions.create_for_issue_comment(self.owner, self.repo, comment_id, content=content)
        assert resp.parsed_data.content == content

    def comment(self, issue: int, body: str) -> int:
        resp = self.gh.rest.issues.create_comment(self.owner, self.repo, issue, body=body)
        return resp.parsed_data.id

    def edit_comment(self, comment_id: int, body: str) -> None:
        self.gh.rest.issues.update_comment(self.owner, self.repo, comment_id, body=body).parsed_data

    def find_comment(self, issue: int, marker: str) -> int | None:
        """The first of the bot's own comments on the issue that carries `marker` (see above)."""
        if not self.bot_login:
            return None
        found = self.own_comment(issue, marker, self.bot_login)
        return found[0] if found else None

    def upsert_comment(self, issue: int, marker: str, body: str, known_id: int | None = None) -> int:
        """Edit the comment carrying `marker` in place, or create it. Returns its id."""
        if known_id:
            try:
                self.edit_comment(known_id, body)
                return known_id
            except RequestFailed as exc:
                if exc.response.status_code != 404:
                    raise
        found = self.find_comment(issue, marker)
        if found:
            self.edit_comment(found, body)
            return found
        return self.comment(issue, body)

    def permission(self, username: str) -> tuple[str, str]:
        """(permission, role_name) from the collaborator-permission API; ('none', '') if unknown."""
        try:
            resp = self.gh.rest.repos.get_collaborator_permission_level(self.owner, self.repo, username)
        except RequestFailed as exc:
            if exc.response.status_code in (403, 404):
                return "none", ""
            raise
        data = resp.parsed_data
        return data.permission, data.role_name

    def head_sha(self, branch: str) -> str:
        resp = self.gh.rest.git.get_ref(self.owner, self.repo, f"heads/{branch}")
        return resp.parsed_data.object_.sha

    def file_text(self, path: str, ref: str) -> str | None:
        try:
            resp = self.gh.rest.repos.get_content(self.owner, self.repo, path, ref=ref)
        except RequestFailed as exc:
            if exc.response.status_code == 404:
                return None
            raise
        data = resp.parsed_data
        if getattr(data, "type", None) != "file":
            return None
        return base64.b64decode(data.content).decode("utf-8", errors="replace")

    def create_draft_pr(self, title: str, head: str, base: str, body: str, head_repo: str = "") -> tuple[int, str]:
        """`head_repo` (owner/name): the fork the head branch is in, when it has the repository's owner
        (GitHub needs it then: `owner:branch` cannot tell the two repositories apart)."""
        extra = {"head_repo": head_repo} if head_repo else {}
        resp = self.gh.rest.pulls.create(self.owner, self.repo, title=title, head=head, base=base, body=body,
                                         draft=True, **extra)
        pr = _pull(resp.json())
        return pr.number, pr.url

    def update_pr(self, number: int, title: str, body: str) -> str:
        resp = self.gh.rest.pulls.update(self.owner, self.repo, number, title=title, body=body)
        return _pull(resp.json()).url

    def pull(self, number: int) -> PullInfo:
        return _pull(self.gh.rest.pulls.get(self.owner, self.repo, number).json())

    # -- the Action's two -----------------------------------------------------------------------
    def own_comment(self, issue: int, marker: str, author: str) -> tuple[int, str] | None:
        """(id, body) of the first comment by `author` that carries `marker` (pages of 100)."""
        return next(self.own_comments(issue, marker, author), None)

    def own_comments(self, issue: int, marker: str, author: str):
        """(id, body) of every comment by `author` that carries `marker`, oldest first."""
        page = 1
        while True:
            comments = self.gh.rest.issues.list_comments(self.owner, self.repo, issue, per_page=100,
                                                         page=page).parsed_data
            for c in comments:
                login = (c.user.login if c.user else "") or ""
                if author and login.lower() == author.lower() and isinstance(c.body, str) and marker in c.body:
                    yield c.id, c.body
            if len(comments) < 100:
                return
            page += 1

    def cancel_workflow_run(self, run_id: int) -> None:
        self.gh.rest.actions.cancel_workflow_run(self.owner, self.repo, run_id)
