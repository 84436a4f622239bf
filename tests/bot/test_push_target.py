from pathlib import Path

from bot.settings import Settings
from bot.tasks import push_target
from jobs.config import ConfigError, parse_config

import pytest

BASE = "build: make\nbenchmark: ./b\nchecks: ./c\nmetrics: [{name: t, primary: true}]\neditable: ['src/**']\n"
REC = {"owner": "octo", "name": "synth"}


def settings(fork_owner=""):
    return Settings(app_id="1", private_key_path=Path("k"), webhook_secret="s", fork_owner=fork_owner)


def test_repo_itself_by_default():
    assert push_target(settings(), parse_config(BASE), REC) == ("octo", "synth")


def test_app_wide_fork_owner():
    assert push_target(settings("forker"), parse_config(BASE), REC) == ("forker", "synth")


def test_repo_config_fork_wins_and_may_rename():
    cfg = parse_config(BASE + "pull_request: {fork: bench-bot/synth-fork}\n")
    assert push_target(settings("forker"), cfg, REC) == ("bench-bot", "synth-fork")
    assert push_target(settings(), parse_config(BASE + "pull_request: {fork: bench-bot}\n"), REC) == ("bench-bot", "synth")


def test_bad_fork_is_a_config_error():
    with pytest.raises(ConfigError, match="pull_request.fork"):
        parse_config(BASE + "pull_request: {fork: 'not a/repo name!'}\n")
