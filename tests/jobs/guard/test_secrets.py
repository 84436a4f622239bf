"""jobs/guard/secrets.py: one policy for what is a secret, used by the runner, cloud tasks, the Claude
agent and the bot; and jobs/contract/errors.py's cancel detection."""
from __future__ import annotations

import pytest

from jobs.guard import secrets
from jobs.contract.errors import RunCancelled, RunError, cancellation

ENV = {"PATH": "/usr/bin", "HOME": "/home/u", "GITHUB_TOKEN": "ghs_abcdef123456", "AWS_PROFILE": "default",
       "ANTHROPIC_API_KEY": "sk-ant-0123456789", "AUTORESEARCH_PRIVATE_KEY_PATH": "/run/secrets/key",
       "AUTORESEARCH_REDIS_URL": "redis://r:6379/0", "SSH_KEY_PATH": "/home/u/.ssh/id", "CC": "gcc",
       "MY_PASSWORD": "hunter2hunter2", "AUTORESEARCH_RUN_ID": "7-abc"}


@pytest.mark.parametrize("name,secret", [
    ("GITHUB_TOKEN", True), ("GH_ENTERPRISE_TOKEN", True), ("AWS_SECRET_ACCESS_KEY", True), ("aws_region", True),
    ("ANTHROPIC_API_KEY", True), ("SIGNING_KEY", True), ("SSH_KEY_PATH", True), ("DB_PASSWORD", True),
    ("GOOGLE_APPLICATION_CREDENTIALS", True), ("PATH", False), ("HOME", False), ("CC", False),
    ("KEYBOARD", False), ("AUTORESEARCH_RUN_ID", False), ("PYTHONPATH", False),
])
def test_names_decide(name, secret):
    assert secrets.is_secret_name(name) is secret


def test_target_code_gets_no_secret_but_keeps_the_rest():
    env = secrets.scrubbed_env(ENV)
    assert set(env) == {"PATH", "HOME", "CC", "AUTORESEARCH_REDIS_URL", "AUTORESEARCH_RUN_ID"}


def test_secret_values_longest_first_and_length_floor():
    values = secrets.secret_values(["extra-secret-value", "abc"], environ=ENV)
    assert values == sorted(values, key=len, reverse=True)
    assert "extra-secret-value" in values and "ghs_abcdef123456" in values and "abc" not in values
    assert "default" in values                                   # 7 characters: redacted ...
    assert "default" not in secrets.secret_values(environ=ENV, min_len=secrets.TASK_MIN_LEN)  # ... not refused


def test_scrub_environment_drops_secrets_and_app_settings_only():
    env = dict(ENV)
    gone = secrets.scrub_environment(env)
    assert set(env) == {"PATH", "HOME", "CC"}
    assert "AUTORESEARCH_PRIVATE_KEY_PATH" in gone and "ghs_abcdef123456" not in gone   # names, never values


def test_task_envs_naming_a_secret_are_named_back():
    assert secrets.leaked_names(["AUTORESEARCH_RUN_ID", "PYTHONPATH", "GH_TOKEN"]) == ["GH_TOKEN"]


def test_cancellation_follows_the_chain():
    try:
        try:
            raise RunCancelled("stop")
        except RunCancelled:
            raise OSError("cleanup of a process group that had just exited")
    except OSError as exc:
        assert cancellation(exc)
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as exc:
        assert cancellation(exc, interrupts=True) and not cancellation(exc)
    assert not cancellation(RunError("broken")) and not cancellation(None)


def test_scrubbing_keeps_the_operators_cache_root_and_git_config_for_the_run():
    """The job scrubs its environment before the pipeline; the pipeline then reads where the
    operator keeps caches and uid claims, and which git config git may read. Scrubbed, an App run
    used ~/.cache/autoresearch whatever AUTORESEARCH_CACHE_ROOT said."""
    env = {**ENV, "AUTORESEARCH_CACHE_ROOT": "/srv/cache", "AUTORESEARCH_GIT_CONFIG": "/etc/autoresearch.gitconfig"}
    secrets.scrub_environment(env)
    assert env["AUTORESEARCH_CACHE_ROOT"] == "/srv/cache"
    assert env["AUTORESEARCH_GIT_CONFIG"] == "/etc/autoresearch.gitconfig"
    assert not any(k.startswith("AUTORESEARCH_") and k not in secrets.RUN_READS for k in env)

