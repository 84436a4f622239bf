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
| AUTORESEARCH_EXECUTOR | local (default) or skypilot |
| AUTORESEARCH_DELIVERY_TTL | seconds a delivery id is remembered for dedupe (default 7 days) |
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


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
    executor: str = "local"
    delivery_ttl: int = 7 * 24 * 3600

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
        executor = env.get("AUTORESEARCH_EXECUTOR", "local")
        if executor not in ("local", "skypilot"):
            raise SettingsError("AUTORESEARCH_EXECUTOR must be local or skypilot")
        return cls(
            app_id=env["AUTORESEARCH_APP_ID"],
            private_key_path=Path(env["AUTORESEARCH_PRIVATE_KEY_PATH"]),
            webhook_secret=env["AUTORESEARCH_WEBHOOK_SECRET"],
            redis_url=env.get("AUTORESEARCH_REDIS_URL", cls.redis_url),
            api_url=env.get("AUTORESEARCH_GITHUB_API_URL", cls.api_url).rstrip("/"),
            git_url=env.get("AUTORESEARCH_GIT_URL", cls.git_url).rstrip("/"),
            bot_login=env.get("AUTORESEARCH_BOT_LOGIN", ""),
            fork_owner=env.get("AUTORESEARCH_FORK_OWNER", ""),
            workdir=Path(env.get("AUTORESEARCH_WORKDIR", str(cls.workdir))),
            executor=executor,
            delivery_ttl=ttl,
        )

    def private_key(self) -> str:
        try:
            return self.private_key_path.read_text()
        except OSError as exc:
            raise SettingsError(f"cannot read the App private key at {self.private_key_path}: {exc}") from None

    def clone_url(self, owner: str, repo: str) -> str:
        return f"{self.git_url}/{owner}/{repo}.git"
