"""F1a of issue 20: a hook planted in the App's clone read the installation token from git's
credential pipe at publish time. Over real smart HTTP (git http-backend behind token auth): hooks in
the clone never run (so nothing can read the pipe), a clone whose config something else wrote is
not given the token, and the credential helper answers only for the remote's own host."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bot import gitclone
from conftest import git, make_repo
from githttp import GitHTTP
from jobs.guard import gitops

TOKEN = "ghs_hookproof0123456789abcdefABCDEF"
HOOKS = ("pre-push", "post-checkout", "reference-transaction", "post-commit", "pre-commit", "push-to-checkout")


@pytest.fixture()
def remote(tmp_path):
    src = make_repo(tmp_path / "src", {"README": "hello\n"})
    root = tmp_path / "remotes"
    (root / "octo").mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(root / "octo" / "synth.git")], check=True)
    server = GitHTTP(root, lambda: [TOKEN])
    server.start()
    yield server, src
    server.stop()


def test_a_pre_push_hook_in_the_clone_never_runs_so_it_never_reads_the_token(remote, tmp_path):
    server, src = remote
    url = f"{server.url}/octo/synth.git"
    clone = gitclone.checkout(url, tmp_path / "clone", git(src, "rev-parse", "HEAD"), lambda: TOKEN, ref="main")
    loot = tmp_path / "loot"
    for name in HOOKS:           # what a build that reached the clone planted (N1, F1a)
        hook = clone / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {loot}\nfor f in /dev/fd/*; do timeout 1 cat $f; done >> {loot} 2>/dev/null\n"
                        f"env >> {loot}\nexit 0\n")
        hook.chmod(0o755)
    # The attack is real: plain git runs the pre-push hook (and would hand it the pipe).
    subprocess.run(["git", "-C", str(clone), "push", "-q", str(tmp_path / "remotes" / "octo" / "synth.git"),
                    "HEAD:refs/heads/plain"], capture_output=True)
    assert "pre-push" in loot.read_text()
    loot.unlink()

    (clone / "README").write_text("changed\n")
    git(clone, "-c", "core.hooksPath=/dev/null", "commit", "-qam", "a change to publish")
    gitclone.push(url, clone, "HEAD", "autoresearch/run-1", lambda: TOKEN)
    gitclone.checkout(url, clone, git(src, "rev-parse", "HEAD"), lambda: TOKEN, ref="main")   # post-checkout
    bare = tmp_path / "remotes" / "octo" / "synth.git"
    assert git(bare, "log", "-1", "--format=%s", "autoresearch/run-1") == "a change to publish"
    assert TOKEN in server.authenticated
    assert not loot.exists()
    for path in tmp_path.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert TOKEN.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("key, value", [
    ("url.http://127.0.0.1:9/.insteadOf", "http://"),          # the push would go (with the token) elsewhere
    ("http.proxy", "http://127.0.0.1:9"),
    ("credential.helper", "store"),
    ("core.fsmonitor", "/tmp/x"),
])
def test_a_clone_whose_config_something_else_wrote_is_not_given_the_token(remote, tmp_path, key, value):
    server, src = remote
    url = f"{server.url}/octo/synth.git"
    clone = gitclone.checkout(url, tmp_path / "clone", git(src, "rev-parse", "HEAD"), lambda: TOKEN, ref="main")
    before = len(server.requests)
    git(clone, "config", key, value)
    with pytest.raises(gitclone.CloneError, match="never writes.*delete"):
        gitclone.push(url, clone, "HEAD", "autoresearch/run-1", lambda: TOKEN)
    assert len(server.requests) == before                      # git never started


def test_the_credential_helper_answers_only_for_the_remotes_own_host(tmp_path):
    read, options = gitclone._credential(TOKEN, "github.example:8443")
    try:
        asked = gitops.run(["credential", "fill"], config=options, pass_fds=(read,),
                           input="protocol=https\nhost=evil.example\n\n")
    finally:
        os.close(read)
    assert TOKEN not in asked.stdout and asked.returncode != 0
    read, options = gitclone._credential(TOKEN, "github.example:8443")
    try:
        asked = gitops.run(["credential", "fill"], config=options, pass_fds=(read,),
                           input="protocol=https\nhost=github.example:8443\n\n")
    finally:
        os.close(read)
    assert f"password={TOKEN}" in asked.stdout


@pytest.mark.parametrize("url, host", [("https://github.com/o/r.git", "github.com"),
                                       ("http://x-access-token@127.0.0.1:8080/o/r.git", "127.0.0.1:8080"),
                                       ("/srv/git/o/r.git", ""), ("file:///srv/o/r.git", "")])
def test_remote_host(url, host):
    assert gitclone.remote_host(url) == host


def test_a_url_whose_host_could_break_out_of_the_helper_is_refused():
    with pytest.raises(gitclone.CloneError, match="not a host name"):
        gitclone.remote_host('https://a";touch${IFS}x;"/o/r.git')


def test_a_clone_whose_git_is_a_link_is_not_used(remote, tmp_path):
    server, src = remote
    other = make_repo(tmp_path / "other", {"x": "y\n"})
    fake = tmp_path / "clone"
    fake.mkdir()
    (fake / ".git").symlink_to(Path(other) / ".git")
    with pytest.raises(gitclone.CloneError, match="not a clone made by autoresearch"):
        gitclone.fetch_ref(f"{server.url}/octo/synth.git", fake, "main", lambda: TOKEN)
