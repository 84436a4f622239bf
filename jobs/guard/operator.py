"""What the operator of a machine decides for every run on it; a repository's config only asks.

The principle: the operator decides, the maintainer approves, the repository only asks.

- **The sandbox.** A repository's `sandbox: {enabled: false}` never turns the sandbox off by itself.
  The operator may allow it (`AUTORESEARCH_ALLOW_UNSANDBOXED=1`, for installations whose
  repositories they trust), and the CLI's user is the operator of their own machine
  (`--no-sandbox`). Reports and PR bodies say who switched it off.
- **The environment.** Target code sees a variable only when the repository asks for it
  (`sandbox.env`) *and* the operator allows its name (`AUTORESEARCH_SANDBOX_ENV`, comma-separated);
  credential-like names never, whatever both say. Reports show names, never values.
- **Limits** (`jobs.guard.limits.Limits`) and **protected paths** (the App's workdir: clones and run
  folders of every repository, which no declared cache may contain or lie in).
- **Secret files** (the App's private key, cloud credentials): whoever holds one names it here,
  and no path a repository declares for its sandbox may be, contain or lie in it
  (`jobs.guard.declared_paths`), wherever the operator keeps it (the cache root included).

- **The compiler cache.** Build steps go through ccache when it is installed and the operator has
  not turned it off (`AUTORESEARCH_CCACHE=0`; `compiler_cache`): its cache lives in the
  repository's own namespace under the cache root, one per arm (`jobs.measure.isolation`), never
  shared between repositories.

The App and the Action read this once from their own environment (`bot.settings`), before the
job's environment is scrubbed; a CLI run reads it from the user's. Pure apart from `from_env`.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from jobs.guard.limits import Limits

TRUE = {"1", "true", "yes", "on"}
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class OperatorError(ValueError):
    """An operator setting is not usable; the message names the variable and the fix."""


@dataclass(frozen=True)
class OperatorPolicy:
    face: str = "app"                     # app | action | cli: who runs the pipeline
    allow_unsandboxed: bool = False       # a repository's `sandbox.enabled: false` may be honoured
    env_allow: tuple[str, ...] = ()       # names target code may be given when a repository asks
    limits: Limits = field(default_factory=Limits)
    protected: tuple[str, ...] = ()       # paths no declared cache may contain or lie in
    secrets: tuple[str, ...] = ()         # the operator's secret files: likewise, named as secrets

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, face: str,
                 protected: Iterable[str] = (), secrets: Iterable[str] = ()) -> "OperatorPolicy":
        env = os.environ if env is None else env
        raw_allow = env.get("AUTORESEARCH_ALLOW_UNSANDBOXED", "").strip().lower()
        if raw_allow and raw_allow not in TRUE | {"0", "false", "no", "off"}:
            raise OperatorError(f"AUTORESEARCH_ALLOW_UNSANDBOXED={raw_allow!r}: write 1 or 0")
        names = tuple(n.strip() for n in env.get("AUTORESEARCH_SANDBOX_ENV", "").split(",") if n.strip())
        bad = [n for n in names if not NAME.match(n)]
        if bad:
            raise OperatorError(f"AUTORESEARCH_SANDBOX_ENV: {bad} are not variable names; fix: a comma-separated "
                                "list such as MODEL_PATH,OMP_NUM_THREADS")
        try:
            limits = Limits.from_env(env)
        except ValueError as exc:
            raise OperatorError(str(exc)) from None
        return cls(face=face, allow_unsandboxed=raw_allow in TRUE, env_allow=names, limits=limits,
                   protected=tuple(str(p) for p in protected if p), secrets=tuple(str(p) for p in secrets if p))

    def sandbox_decision(self, repo_enabled: bool, cli_no_sandbox: bool = False) -> tuple[bool, str, str]:
        """(sandboxed, who switched it off or '', a warning or ''). Pure."""
        if cli_no_sandbox:
            return False, "--no-sandbox (the operator)", ""
        if repo_enabled:
            return True, "", ""
        if self.allow_unsandboxed:
            return False, "the repository's config, allowed by the operator (AUTORESEARCH_ALLOW_UNSANDBOXED)", ""
        fix = "--no-sandbox" if self.face == "cli" else "AUTORESEARCH_ALLOW_UNSANDBOXED=1 in the operator's settings"
        return True, "", ("the repository's config asks for `sandbox: {enabled: false}`; only the operator can turn "
                          f"the sandbox off ({fix}), so target code runs sandboxed")

    def allowed_env(self, asked: Iterable[str]) -> tuple[list[str], list[str]]:
        """(names target code gets, names the repository asked for that the operator does not allow). Pure."""
        from jobs.guard.secrets import target_may_see
        asked = list(dict.fromkeys(asked))
        given = [n for n in asked if n in self.env_allow and target_may_see(n)]
        return given, [n for n in asked if n not in given]


# Where Debian, Fedora, Homebrew and a source install keep ccache's compiler masquerade (gcc, cc, g++,
# c++, clang... as links to ccache): first on a build step's PATH, every compiler call goes through it.
CCACHE_MASQUERADE = ("/usr/lib/ccache", "/usr/lib64/ccache", "/usr/local/lib/ccache", "/usr/local/libexec/ccache",
                     "/opt/homebrew/opt/ccache/libexec")


def compiler_cache(env: Mapping[str, str] | None = None, masquerade: Iterable[str] = CCACHE_MASQUERADE) -> str:
    """The folder of ccache's compiler masquerade a build step gets first on its PATH, or '' for no
    compiler cache: ccache not installed (no `ccache` on PATH, no masquerade folder), or the operator
    turned it off (`AUTORESEARCH_CCACHE=0`; any other value, or none, leaves it on)."""
    env = os.environ if env is None else env
    raw = env.get("AUTORESEARCH_CCACHE", "").strip().lower()
    if raw in {"0", "false", "no", "off"}:
        return ""
    if raw and raw not in TRUE:
        raise OperatorError(f"AUTORESEARCH_CCACHE={raw!r}: write 1 or 0")
    if not shutil.which("ccache", path=env.get("PATH", os.defpath)):
        return ""
    return next((d for d in masquerade if os.path.isfile(os.path.join(d, "gcc")) or os.path.isfile(os.path.join(d, "cc"))), "")
