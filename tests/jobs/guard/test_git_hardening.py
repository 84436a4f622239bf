"""git runs nothing a repository controls (issue 20: N1's hooks, N3's rewritten `.git`, filters), and
files are read out of trees without following links or reading without bound (N7). Real git; each
attack is planted, shown to work against plain git, and shown to do nothing through jobs.guard.gitops."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import git, make_repo
from jobs.guard import githarden, gitops, safefs

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test

HOOKS = ("post-checkout", "pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-rewrite",
         "reference-transaction", "post-index-change", "pre-auto-gc", "pre-push", "post-merge", "pre-applypatch")


# -- the argv and environment (pure) -------------------------------------------------------------
def test_every_git_process_forces_the_program_running_keys_off_before_its_command():
    argv = githarden.command(["commit", "-m", "x"], git_dir="/r/.git/worktrees/t", work_tree="/w/t", cwd="/w/t",
                             config=[("credential.helper", "mine")])
    assert argv[:2] == ["git", "--no-pager"] and argv[-3:] == ["commit", "-m", "x"]
    forced = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    for key, value in [("core.hooksPath", "/dev/null"), ("core.fsmonitor", "false"), ("credential.helper", ""),
                       ("protocol.allow", "never"), ("protocol.ext.allow", "never"), ("core.editor", ":"),
                       ("submodule.recurse", "false"), ("commit.gpgSign", "false"), ("gc.auto", "0")]:
        assert f"{key}={value}" in forced
    assert forced[-1] == "credential.helper=mine"             # the caller's own come last, so they win
    assert "--git-dir=/r/.git/worktrees/t" in argv and "--work-tree=/w/t" in argv
    assert argv.index("--git-dir=/r/.git/worktrees/t") < argv.index("commit")
    assert all("safe.directory" not in a for a in argv)       # git's ownership check stays on


def test_the_environment_keeps_nothing_of_the_callers_git_settings():
    inherited = {"PATH": "/bin", "HOME": "/home/app", "GIT_DIR": "/evil", "GIT_SSH_COMMAND": "nc evil 1",
                 "GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='/evil'", "GIT_EXTERNAL_DIFF": "/evil",
                 "AUTORESEARCH_PRIVATE_KEY_PATH": "/run/secrets/key", "GITHUB_TOKEN": "ghs_x"}
    env = githarden.environment(inherited)
    assert env["PATH"] == "/bin" and env["HOME"] == "/dev/null"
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert not {"GIT_DIR", "GIT_SSH_COMMAND", "GIT_CONFIG_PARAMETERS", "GIT_EXTERNAL_DIFF",
                "AUTORESEARCH_PRIVATE_KEY_PATH", "GITHUB_TOKEN"} & set(env)
    assert githarden.environment(inherited, global_config="/etc/autoresearch/git")["GIT_CONFIG_GLOBAL"] == \
        "/etc/autoresearch/git"


@pytest.mark.parametrize("key, unsafe", [
    ("filter.evil.smudge", True), ("filter.lfs.process", True), ("diff.pdf.textconv", True),
    ("diff.x.command", True), ("diff.external", True), ("merge.ours.driver", True), ("include.path", True),
    ("includeif.gitdir:/x/.path", True), ("core.alternaterefscommand", True), ("trailer.sign.command", True),
    ("hook.lint.command", True),
    ("core.filemode", False), ("remote.origin.url", False), ("user.name", False), ("core.fsmonitor", False),
    ("core.hookspath", False),     # these two are forced off on the command line instead
])
def test_config_keys_that_name_a_program_are_unsafe(key, unsafe):
    assert (githarden.unsafe_keys([key]) == [key]) is unsafe


def test_a_gitfile_names_its_git_dir():
    assert githarden.gitfile_target("gitdir: /r/.git/worktrees/t\n") == "/r/.git/worktrees/t"
    assert githarden.gitfile_target("[core]\n\tfsmonitor = x\n") is None


# -- real git -----------------------------------------------------------------------------------
def plant_hooks(hooks_dir: Path, marker: Path) -> None:
    hooks_dir.mkdir(parents=True, exist_ok=True)
    for name in HOOKS:
        hook = hooks_dir / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {marker}\ncat /dev/fd/* >> {marker}.fds 2>/dev/null\nexit 0\n")
        hook.chmod(0o755)


@pytest.fixture()
def repo(tmp_path):
    return make_repo(tmp_path / "repo", {"src/a.c": "int a;\n", "README": "hi\n"})


def test_hooks_planted_in_the_clone_never_run_n1(repo, tmp_path):
    marker = tmp_path / "hook-ran"
    plant_hooks(repo / ".git" / "hooks", marker)
    # The attack is real: plain git runs the planted hook on `worktree add`.
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(tmp_path / "plain"), "HEAD"],
                   check=True, capture_output=True)
    assert "post-checkout" in marker.read_text()
    marker.unlink()
    subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tmp_path / "plain")], check=True)
    marker.unlink(missing_ok=True)
    Path(f"{marker}.fds").unlink(missing_ok=True)

    base = gitops.head_commit(repo)
    tree = gitops.add_worktree(repo, tmp_path / "work" / "impl", base)
    plant_hooks(repo / ".git" / "worktrees" / "impl" / "hooks", marker)       # the worktree's own git dir too
    (tree / "src" / "a.c").write_text("int a = 1;\n")
    first = gitops.commit_all(tree, "one")
    gitops.apply_patch(tree, "--- a/README\n+++ b/README\n@@ -1 +1 @@\n-hi\n+hello\n")
    second = gitops.commit_all(tree, "two")
    stack = gitops.add_worktree(repo, tmp_path / "work" / "stack", base)
    assert gitops.cherry_pick(stack, first) and gitops.cherry_pick(stack, second)
    gitops.set_branch(repo, "autoresearch/r1", gitops.head_commit(stack))
    gitops.remove_worktree(repo, tree)
    gitops.remove_worktree(repo, stack)
    assert gitops.delete_branches(repo, "autoresearch/*") == ["autoresearch/r1"]
    assert not marker.exists() and not Path(f"{marker}.fds").exists()


def test_a_filter_in_the_repositorys_config_is_refused_not_run(repo, tmp_path):
    marker = tmp_path / "filter-ran"
    (repo / ".gitattributes").write_text("* filter=evil\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    git(repo, "config", "filter.evil.smudge", f"sh -c 'touch {marker}; cat'")
    git(repo, "config", "filter.evil.clean", f"sh -c 'touch {marker}; cat'")
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(tmp_path / "plain"), "HEAD"],
                   check=True, capture_output=True)
    assert marker.exists()                                   # plain git runs the filter
    marker.unlink()
    with pytest.raises(gitops.GitError, match=r"filter\.evil\.(clean|smudge).*runs? a program"):
        gitops.add_worktree(repo, tmp_path / "work" / "t", "HEAD")
    with pytest.raises(gitops.GitError, match="filter.evil"):
        gitops.is_clean(repo)
    assert not marker.exists()


def test_fsmonitor_and_includes_of_the_repository_are_not_obeyed(repo, tmp_path):
    marker = tmp_path / "fsmonitor-ran"
    script = tmp_path / "fsmon.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(script))
    (repo / "src" / "a.c").write_text("int a = 2;\n")
    assert not gitops.is_clean(repo) and not marker.exists()        # status ran, the fsmonitor did not
    subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], check=True, capture_output=True)
    assert marker.exists()                                           # ... which plain git would have run
    git(repo, "config", "include.path", str(tmp_path / "more.gitconfig"))
    with pytest.raises(gitops.GitError, match="include.path"):
        gitops.commit_all(repo, "x")


def test_a_worktree_whose_git_file_was_rewritten_is_not_run_in_n3(repo, tmp_path):
    """What a build with a writable tree can do to its worktree's `.git`: make it a repository of
    its own with `core.fsmonitor`, or point it elsewhere. Git is then not run there at all."""
    marker = tmp_path / "fsmonitor-ran"
    script = tmp_path / "fsmon.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    tree = gitops.add_worktree(repo, tmp_path / "work" / "impl", "HEAD")
    (tree / ".git").unlink()
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    subprocess.run(["git", "-C", str(tree), "config", "core.fsmonitor", str(script)], check=True)
    (tree / "src" / "a.c").write_text("int a = 3;\n")
    with pytest.raises(gitops.GitError, match="tampered"):
        gitops.commit_all(tree, "x")
    assert not marker.exists()
    subprocess.run(["git", "-C", str(tree), "status"], capture_output=True)
    assert marker.exists()                                    # plain git in that tree runs the attacker's program
    # The real repository is untouched, and the tree can still be removed (without git in it).
    assert git(repo, "status", "--porcelain") == "" and len(git(repo, "log", "--format=%H").split()) == 1
    gitops.remove_worktree(repo, tree)
    assert not tree.exists() and gitops.worktrees(repo) == []


def test_a_worktree_git_file_pointing_elsewhere_is_refused(repo, tmp_path):
    tree = gitops.add_worktree(repo, tmp_path / "work" / "impl", "HEAD")
    (tree / ".git").write_text(f"gitdir: {tmp_path / 'evil'}\n")
    with pytest.raises(gitops.GitError, match="rewritten"):
        gitops.head_commit(tree)
    (tree / ".git").unlink()
    (tree / ".git").symlink_to(repo / ".git")
    with pytest.raises(gitops.GitError, match="tampered"):
        gitops.head_commit(tree)


def test_pinned_worktrees_work_from_their_subfolders_and_other_paths_are_discovered(repo, tmp_path):
    tree = gitops.add_worktree(repo, tmp_path / "work" / "impl", "HEAD")
    assert gitops.pinned(tree) and gitops.toplevel(tree) == tree.resolve()
    assert gitops.head_commit(tree) == gitops.head_commit(repo)
    assert gitops.toplevel(repo / "src") == repo.resolve() and not gitops.pinned(repo)
    assert gitops.toplevel(tmp_path) is None


# -- reading files out of trees (N7) --------------------------------------------------------------
def test_safe_reads_refuse_links_devices_and_oversized_files(tmp_path):
    secret = tmp_path / "app.pem"
    secret.write_text("-----BEGIN KEY-----\nsecretbytes\n")
    tree = tmp_path / "tree"
    (tree / "d").mkdir(parents=True)
    (tree / "d" / "ok.patch").write_text("fine\n")
    (tree / "key.patch").symlink_to(secret)
    (tree / "zero.patch").symlink_to("/dev/zero")
    (tree / "via").symlink_to(tree / "d")
    (tree / "big").write_bytes(b"x" * 2048)
    os.mkfifo(tree / "fifo")
    assert safefs.read_text(tree, "d/ok.patch", 100) == "fine\n"
    for rel, why in [("key.patch", "symbolic link"), ("zero.patch", "symbolic link"), ("via/ok.patch", "symbolic link"),
                     ("big", "more than the 1024"), ("fifo", "not a regular file"), ("../app.pem", "not a path inside")]:
        with pytest.raises(safefs.UnsafeFile, match=why):
            safefs.read_bytes(tree, rel, 1024)
    with pytest.raises(FileNotFoundError):
        safefs.read_bytes(tree, "missing", 1024)
    assert sorted(safefs.walk_files(tree)) == ["big", "d/ok.patch"]


# -- a whole run (the CLI) with hooks and a worktree hook dir planted in the target -------------------
@pytest.mark.skipif(__import__("shutil").which("bwrap") is None, reason="bubblewrap is installed by `make test`")
def test_a_whole_run_with_hooks_planted_in_the_target_runs_none_of_them(tmp_path):
    import sys

    from conftest import ROOT
    from synthetic import FASTER, patch_for, synthetic_target
    marker = tmp_path / "hook-ran"
    target = synthetic_target(tmp_path / "target")
    patch = patch_for(target, tmp_path / "faster.patch", {"src/speed.txt": FASTER})
    plant_hooks(target / ".git" / "hooks", marker)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "run", str(target), "--agent", "none", "--candidate",
                           str(patch), "--run-id", "hooks", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "faster" in (out / "pr.md").read_text()
    assert git(target, "rev-parse", "--verify", "-q", "refs/heads/autoresearch/hooks") != ""   # git did work
    assert not marker.exists() and not Path(f"{marker}.fds").exists()


def test_build_outputs_and_build_files_are_read_without_following_links(tmp_path):
    """N7 for the yardstick's artifact hashes and the C research: a link a build leaves (to a
    secret, to /dev/zero) is never hashed or read."""
    from jobs.research.clib import build_files
    from jobs.measure.simrun import artifact_hashes
    secret = tmp_path / "app-key.pem"
    secret.write_text("KEY")
    tree = tmp_path / "tree"
    (tree / "lib").mkdir(parents=True)
    (tree / "lib" / "real.o").write_bytes(b"\x7fELF")
    (tree / "lib" / "key.o").symlink_to(secret)
    (tree / "lib" / "zero.o").symlink_to("/dev/zero")
    (tree / "out").symlink_to(tmp_path)                      # a folder link: not walked
    (tree / "Makefile").symlink_to(secret)
    (tree / "sub").mkdir()
    (tree / "sub" / "Makefile").write_text("CFLAGS = -O2\n")
    hashes = artifact_hashes(tree, ["lib/*.o", "out/*"])
    assert list(hashes) == ["lib/real.o"]
    assert build_files(tree, ["**"]) == ["sub/Makefile"]
