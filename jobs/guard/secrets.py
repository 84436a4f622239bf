"""Which environment variables are secrets, and keeping them from target code, the model and VMs.

One policy, used by every place that hands something to an untrusted party:

- `jobs.guard.sandbox` builds target code's environment from an allow-list (the names a config asks for
  that the operator allows, `jobs.guard.operator`) and never passes a name for which `target_may_see` is
  false, even when both list it (`scrubbed_env()` only serves runs the operator left unsandboxed);
  reports name those variables, never their values;
- `jobs.executors.cloud.tasks` refuses a SkyPilot task that names or contains a secret (`leaked_names`,
  `secret_values(min_len=TASK_MIN_LEN)`);
- `jobs.agent.llm` (the model agent, any provider) redacts `secret_values()` from every text it sends to the model;
- the bot (`bot.flow`) calls `scrub_environment()` in the job's own process before the pipeline
  starts, which also drops the App's settings (`AUTORESEARCH_*`: key path, Redis URL, webhook
  secret), so not even a child process that reads its parent's environment finds them; only the
  two paths the run itself reads later stay (`RUN_READS`: the cache root and the git config).

A variable is a *secret* when its name looks like a credential (`SECRET_NAME`): it contains TOKEN,
SECRET, PASSWORD, PRIVATE, CREDENTIAL or API_KEY, ends in _KEY or _KEY_PATH, or starts with AWS_,
GH_ or GITHUB_. Names decide, not values: a value cannot be recognised, a name can.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, MutableMapping

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PRIVATE|CREDENTIAL|API_KEY|_KEY$|_KEY_PATH$|^AWS_|^GH_|^GITHUB_",
                         re.I)
APP_SETTING = re.compile(r"^AUTORESEARCH_", re.I)     # the App's own settings (see bot/settings.py)
# Operator settings the run itself reads after the scrub, each a path and no secret: where declared
# caches and the uid claims live (`jobs.guard.sandbox.cache_root`), and the one git config git reads
# (`jobs.guard.gitops`). Scrubbed, a job fell back to ~/.cache/autoresearch whatever the operator set.
RUN_READS = frozenset({"AUTORESEARCH_CACHE_ROOT", "AUTORESEARCH_GIT_CONFIG"})
# Settings of the App that target code must never see even when a repository's config asks for
# them by name (a target may legitimately read its own AUTORESEARCH_MODEL, say).
APP_ONLY = re.compile(r"^AUTORESEARCH_(APP|WEBHOOK|REDIS|PRIVATE|DASHBOARD|GITHUB|FORK|LEASE|WORKDIR)", re.I)
# Shorter values are not worth redacting (they would also hit ordinary words). A task is refused
# outright on a match, so there the bar is higher: `AWS_PROFILE=default` must not block a launch.
REDACT_MIN_LEN = 6
TASK_MIN_LEN = 8


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def target_may_see(name: str) -> bool:
    """Whether a variable of this name may be passed through to target code at all."""
    return not is_secret_name(name) and not APP_ONLY.search(name)


def scrubbed_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment without its secrets: what target code is given."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if not is_secret_name(k)}


def secret_values(extra: Iterable[str] | None = None, environ: Mapping[str, str] | None = None,
                  min_len: int = REDACT_MIN_LEN) -> list[str]:
    """Values of the environment's secrets plus `extra`, longest first (so redacting one never
    leaves part of a longer one behind)."""
    environ = os.environ if environ is None else environ
    values = {v for k, v in environ.items() if is_secret_name(k) and len(v) >= min_len}
    values |= {v for v in (extra or ()) if v and len(v) >= min_len}
    return sorted(values, key=len, reverse=True)


def leaked_names(names: Iterable[str]) -> list[str]:
    """Those of `names` that are secrets (e.g. the envs of a task about to leave this machine)."""
    return [n for n in names if is_secret_name(n)]


def scrub_environment(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Delete every secret and every App setting from this process's environment (or `environ`),
    before target code runs in it or in its children. Returns the names removed (never values)."""
    environ = os.environ if environ is None else environ
    gone = [name for name in list(environ)
            if is_secret_name(name) or (APP_SETTING.search(name) and name.upper() not in RUN_READS)]
    for name in gone:
        del environ[name]
    return gone
