"""App settings, read once from the environment (12-factor).

| variable | meaning |
|---|---|
| AUTORESEARCH_APP_ID | the GitHub App's id |
| AUTORESEARCH_PRIVATE_KEY_PATH | PEM file of the App's private key |
| AUTORESEARCH_WEBHOOK_SECRET | the webhook secret configured on the App |
| AUTORESEARCH_REDIS_URL | Redis for the queue, dedupe and run records (default redis://127.0.0.1:6379/0) |
| AUTORESEARCH_GITHUB_API_URL | REST API base (default https://api.github.com; tests point it at a fake) |
| AUTORESEARCH_GIT_URL | where `owner/repo.git` is cloned from and pushed to (default https://github.com) |
| AUTORESEARCH_BOT_LOGIN | the App's bot login, e.g. `autoresearch[bot]` (its comments are ignored) |
| AUTORESEARCH_FORK_OWNER | push run branches to `<owner>/<repo>` instead of the repository itself |
| AUTORESEARCH_WORKDIR | clones and run artifacts (default ~/.cache/autoresearch/bot) |
| AUTORESEARCH_EXECUTOR | an executor of `jobs.executors.registry`: local (default) or skypilot |
| AUTORESEARCH_DELIVERY_TTL | seconds a delivery id is remembered for dedupe (default 7 days) |
| AUTORESEARCH_ALLOW_UNSANDBOXED | 1: a repository's `sandbox: {enabled: false}` is honoured (trusted installations only; default: ignored) |
| AUTORESEARCH_SANDBOX_ENV | comma-separated names target code may get when a repository's `sandbox.env` asks (default: none) |
| AUTORESEARCH_LIMIT_* | per-step limits of the sandbox (jobs/guard/limits.py: memory, processes, file size, tmpfs, output) |

The last three are the operator's (`jobs.guard.operator.OperatorPolicy`), read here, before the job's
environment is scrubbed, and handed to every run (`Settings.operator`); a repository only asks.
So are the operator's secret files, the private key and the cloud credentials (`~/.aws`, which
SkyPilot reads and the Action writes): no path a repository declares for its sandbox may be,
contain or lie in one, wherever the operator keeps it.

The Action (`Settings.for_action`) reads the workflow's own variables instead: GITHUB_API_URL,
GITHUB_SERVER_URL, RUNNER_TEMP, and AUTORESEARCH_EXECUTOR=auto or an executor's name.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from jobs.api import DEFAULT_EXECUTOR, EXECUTORS, OperatorError, OperatorPolicy, executor_names, hide_from_sandbox

ACTION_BOT_LOGIN = "github-actions[bot]"     # who the workflow's token comments as


class SettingsError(RuntimeError):
    pass


@dataclass(frozen=True)
class Settings:
    app_id: str
    private_key_path: Path
    webhook_secret: str
    redis_url: str = "redis://127.0.0.1:6379/0"
    api_url: str = "https://api.github.com"
    git_url: str = "https://github.com"
    bot_login: str = ""
    fork_owner: str = ""
    workdir: Path = Path.home() / ".cache" / "autoresearch" / "bot"
    executor: str = DEFAULT_EXECUTOR
    delivery_ttl: int = 7 * 24 * 3600
    operator: OperatorPolicy = OperatorPolicy(face="app")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        missing = [k for k in ("AUTORESEARCH_APP_ID", "AUTORESEARCH_PRIVATE_KEY_PATH",
                               "AUTORESEARCH_WEBHOOK_SECRET") if not env.get(k)]
        if missing:
            raise SettingsError(f"missing environment variable(s): {', '.join(missing)}")
        try:
            ttl = int(env.get("AUTORESEARCH_DELIVERY_TTL", 7 * 24 * 3600))
        except ValueError:
            raise SettingsError("AUTORESEARCH_DELIVERY_TTL must be an integer number of seconds") from None
        executor = env.get("AUTORESEARCH_EXECUTOR", DEFAULT_EXECUTOR)
        if executor not in EXECUTORS:
            raise SettingsError(f"AUTORESEARCH_EXECUTOR must be {' or '.join(executor_names())}")
        # The key file is masked in every sandbox of this process (inside the system directories),
        # and named to the operator's policy, which refuses declared paths that reach it elsewhere.
        hide_from_sandbox(env["AUTORESEARCH_PRIVATE_KEY_PATH"])
        workdir = Path(env.get("AUTORESEARCH_WORKDIR", str(cls.workdir)))
        return cls(
            app_id=env["AUTORESEARCH_APP_ID"],
            private_key_path=Path(env["AUTORESEARCH_PRIVATE_KEY_PATH"]),
            webhook_secret=env["AUTORESEARCH_WEBHOOK_SECRET"],
            redis_url=env.get("AUTORESEARCH_REDIS_URL", cls.redis_url),
            api_url=env.get("AUTORESEARCH_GITHUB_API_URL", cls.api_url).rstrip("/"),
            git_url=env.get("AUTORESEARCH_GIT_URL", cls.git_url).rstrip("/"),
            bot_login=env.get("AUTORESEARCH_BOT_LOGIN", ""),
            fork_owner=env.get("AUTORESEARCH_FORK_OWNER", ""),
            workdir=workdir,
            executor=executor,
            delivery_ttl=ttl,
            operator=operator_policy(env, "app", workdir, env["AUTORESEARCH_PRIVATE_KEY_PATH"]),
        )

    @classmethod
    def for_action(cls, env: dict[str, str]) -> "Settings":
        """The Action's settings, from the workflow's environment: no App id, key or webhook (it
        has a token); `AUTORESEARCH_EXECUTOR=auto` (the default) is the first registered executor
        that uses cloud credentials (skypilot) when AWS credentials are at hand, else local; run
        folders under RUNNER_TEMP."""
        executor = env.get("AUTORESEARCH_EXECUTOR") or "auto"
        if executor == "auto":
            has_cloud = bool(env.get("AWS_ACCESS_KEY_ID")) or cloud_credentials().is_file()
            cloud = [k.name for k in EXECUTORS.values() if k.uses_cloud_credentials]
            executor = cloud[0] if has_cloud and cloud else DEFAULT_EXECUTOR
        if executor not in EXECUTORS:
            raise SettingsError(f"executor must be auto, {' or '.join(executor_names())}")
        runner_temp = env.get("RUNNER_TEMP") or str(Path.home() / ".cache")
        workdir = Path(env.get("AUTORESEARCH_WORKDIR") or Path(runner_temp) / "autoresearch")
        return cls(
            app_id="", private_key_path=Path("/nonexistent"), webhook_secret="", redis_url="", executor=executor,
            api_url=(env.get("AUTORESEARCH_GITHUB_API_URL") or env.get("GITHUB_API_URL") or cls.api_url).rstrip("/"),
            git_url=(env.get("AUTORESEARCH_GIT_URL") or env.get("GITHUB_SERVER_URL") or cls.git_url).rstrip("/"),
            bot_login=env.get("AUTORESEARCH_BOT_LOGIN") or ACTION_BOT_LOGIN,
            fork_owner=env.get("AUTORESEARCH_FORK_OWNER", ""),
            workdir=workdir,
            operator=operator_policy(env, "action", workdir),
        )

    def private_key(self) -> str:
        try:
            return self.private_key_path.read_text()
        except OSError as exc:
            raise SettingsError(f"cannot read the App private key at {self.private_key_path}: {exc}") from None

    def clone_url(self, owner: str, repo: str) -> str:
        return f"{self.git_url}/{owner}/{repo}.git"


def cloud_credentials() -> Path:
    """The file SkyPilot reads the operator's AWS credentials from (the Action writes it)."""
    return Path.home() / ".aws" / "credentials"


def operator_policy(env, face: str, workdir: Path, *secrets: str) -> OperatorPolicy:
    """The operator's decisions, from the App's (or the workflow's) own environment, never from a
    repository; the workdir (every run's clone and files) is protected from declared caches, and so
    are `secrets` (the App's key) and the cloud credentials' folder (it holds config and tokens too)."""
    try:
        return OperatorPolicy.from_env(env, face=face, protected=(str(workdir),),
                                       secrets=(*secrets, str(cloud_credentials().parent)))
    except OperatorError as exc:
        raise SettingsError(str(exc)) from None
