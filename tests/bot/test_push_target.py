import pytest

from bot.flow import push_target
from jobs.contract.config import ConfigError, parse_config

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


def test_bench_fetches_the_head_from_the_pull_requests_head_repo(tmp_path):
    """Not from AUTORESEARCH_FORK_OWNER: the head lives where the PR says (issue 12)."""
    from types import SimpleNamespace

    from bot import bench
    from bot.github import PullInfo
    from jobs import api

    class Fetched(Exception):
        pass

    fetched: list[str] = []

    def fetch_ref(url, dest, ref, token):
        fetched.append(url)
        raise Fetched

    pull = PullInfo(7, "https://github.com/octo/synth/pull/7", "autoresearch/7-abc", "b" * 40, "main", "a" * 40,
                    "bot", "someone/synth-fork")
    flow = SimpleNamespace(
        gh=SimpleNamespace(owner="octo", repo="synth", pull=lambda n: pull, bot_login="bot"),
        place=SimpleNamespace(fork_owner="forker", clone_url=lambda o, r: f"file:///git/{o}/{r}.git"),
        git=SimpleNamespace(checkout=lambda *a, **k: None, fetch_ref=fetch_ref), token=None,
        layout=lambda run_id: api.RunLayout(tmp_path, "octo", "synth", run_id))
    with pytest.raises(Fetched):
        bench.run(flow, SimpleNamespace(issue_number=7))
    assert fetched == ["file:///git/someone/synth-fork.git"]
