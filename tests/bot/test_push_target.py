import pytest

from bot.flow import push_target
from jobs.config import ConfigError, parse_config

BASE = "build: make\nbenchmark: ./b\nchecks: ./c\nmetrics: [{name: t, primary: true}]\neditable: ['src/**']\n"


def test_repo_itself_by_default():
    assert push_target("", parse_config(BASE), "octo", "synth") == ("octo", "synth")


def test_app_wide_fork_owner():
    assert push_target("forker", parse_config(BASE), "octo", "synth") == ("forker", "synth")


def test_repo_config_fork_wins_and_may_rename():
    cfg = parse_config(BASE + "pull_request: {fork: bench-bot/synth-fork}\n")
    assert push_target("forker", cfg, "octo", "synth") == ("bench-bot", "synth-fork")
    assert push_target("", parse_config(BASE + "pull_request: {fork: bench-bot}\n"), "octo", "synth") == ("bench-bot", "synth")


def test_bad_fork_is_a_config_error():
    with pytest.raises(ConfigError, match="pull_request.fork"):
        parse_config(BASE + "pull_request: {fork: 'not a/repo name!'}\n")
