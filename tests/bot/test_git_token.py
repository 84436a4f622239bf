"""The installation token reaches git, and only git: over real smart HTTP (git http-backend behind
GitHub-style token auth), while another process of the same user scrapes every process's
`/proc/<pid>/environ` and `/proc/<pid>/cmdline` for it."""
from __future__ import annotations

import base64
import json
import subprocess
import sys
import time

import pytest

from bot import gitclone
from conftest import git, make_repo
from githttp import GitHTTP

TOKEN = "ghs_pushtoken0123456789abcdefABCDEF"

# A same-user process that reads every process's environment and argv as fast as it can until told
# to stop; it reports each needle it found (and where) and which git commands it saw, which shows
# that it was watching while the push ran.
WATCHER = r"""
import json, os, sys
needles = [n.encode() for n in json.loads(sys.argv[1])]
stop, out = sys.argv[2], sys.argv[3]
found, seen = [], set()
me = str(os.getpid())
while not os.path.exists(stop):
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            for n in needles:
                if n in data:
                    found.append([pid, part, data.replace(b"\0", b" ").decode(errors="replace")[:300]])
            argv = data.split(b"\0")
            if part == "cmdline" and b"git" in argv[0]:
                seen.add(" ".join(a.decode(errors="replace").rsplit("/", 1)[-1] for a in argv[:2]))
with open(out, "w") as fh:
    json.dump({"found": found, "seen": sorted(seen)}, fh)
"""


def needles(token: str) -> list[str]:
    """The token in every form a client could carry it: itself, and HTTP Basic credentials."""
    return [token, base64.b64encode(f"x-access-token:{token}".encode()).decode(),
            base64.b64encode(token.encode()).decode()[:-4]]


@pytest.fixture()
def remote(tmp_path):
    """A bare repo `octo/synth.git` behind token auth, and a clone to push from."""
    src = make_repo(tmp_path / "src", {"README": "hello\n"})
    root = tmp_path / "remotes"
    (root / "octo").mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(root / "octo" / "synth.git")], check=True)
    server = GitHTTP(root, lambda: [TOKEN], delay=0.3)
    server.start()
    yield server, src
    server.stop()


def test_push_token_is_in_no_environ_and_no_cmdline_of_any_process(remote, tmp_path):
    server, src = remote
    url = f"{server.url}/octo/synth.git"
    clone = gitclone.checkout(url, tmp_path / "clone", git(src, "rev-parse", "HEAD"), lambda: TOKEN, ref="main")
    (clone / "README").write_text("changed\n")
    git(clone, "commit", "-qam", "a change to publish")
    git(clone, "branch", "-f", "autoresearch/run-1", "HEAD")

    stop, report = tmp_path / "stop", tmp_path / "watch.json"
    watcher = subprocess.Popen([sys.executable, "-c", WATCHER, json.dumps(needles(TOKEN)), str(stop), str(report)])
    try:
        time.sleep(0.3)                              # the watcher is scanning before git starts
        gitclone.push(url, clone, "refs/heads/autoresearch/run-1", "autoresearch/run-1", lambda: TOKEN)
    finally:
        stop.touch()
        watcher.wait(timeout=30)
    watched = json.loads(report.read_text())

    bare = tmp_path / "remotes" / "octo" / "synth.git"
    assert git(bare, "log", "-1", "--format=%s", "autoresearch/run-1") == "a change to publish"
    assert TOKEN in server.authenticated                           # git really handed the token over
    assert any("receive-pack" in c or "remote-http" in c for c in watched["seen"]), watched["seen"]
    assert watched["found"] == []                                 # ... and no other process could see it
    config = (clone / ".git" / "config").read_text()
    assert TOKEN not in config and "extraheader" not in config.lower()
    for path in clone.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_a_wrong_token_fails_with_a_clear_error_that_does_not_echo_it(remote, tmp_path):
    server, src = remote
    with pytest.raises(gitclone.CloneError, match="git clone failed: .*Authentication failed") as info:
        gitclone.checkout(f"{server.url}/octo/synth.git", tmp_path / "clone", git(src, "rev-parse", "HEAD"),
                          lambda: "ghs_not-the-token-0123456789")
    assert "ghs_not-the-token" not in str(info.value)
    assert any(status == 401 for _, _, status in server.requests) and not server.authenticated


def test_a_token_that_is_not_one_line_is_refused_before_git_runs(tmp_path):
    with pytest.raises(gitclone.CloneError, match="not a token"):
        gitclone.fetch_ref("http://127.0.0.1:9/x.git", tmp_path, "main", lambda: "ghs_a\nprotocol=file")


def test_helpers_of_the_users_git_config_are_not_asked(remote, tmp_path, monkeypatch):
    """A credential helper in the global git config (a store that could write the token to disk)
    is switched off for the bot's git processes."""
    server, src = remote
    home = tmp_path / "home"
    home.mkdir()
    store = home / "stored-credentials"
    (home / ".gitconfig").write_text(f"[credential]\n\thelper = store --file={store}\n")
    monkeypatch.setenv("HOME", str(home))
    gitclone.checkout(f"{server.url}/octo/synth.git", tmp_path / "clone", git(src, "rev-parse", "HEAD"),
                      lambda: TOKEN, ref="main")
    assert not store.exists()
