"""N3 (issue 20) with `agent: claude`: the model's quick build runs sandboxed (real bubblewrap) with
its worktree writable, and turns the worktree's `.git` into a repository of its own whose config
names a program (`core.fsmonitor`, a hook, a clean filter). The worker then must not run git in
that tree: the attempt fails with a reason and the planted program never runs on the host. Also:
a link the build leaves in the tree is never read through by the agent's file tools (N7)."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import git
from fake_anthropic import FakeMessagesAPI, text, tool_use
from jobs.guard import gitops
from jobs.agent.offline import NotImplementable
from synthetic import synthetic_target
from test_claude_agent import EDIT, H, agent_for, expect_error, expect_ok

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is installed by `make test`")

# Runs inside the sandbox, in the worktree (the only place it may write). {git} is the new `.git`.
TAMPER = r"""
if [ -f .git ]; then
  printf '#!/bin/sh\ntouch {marker}\n' > .fsmon.sh; chmod +x .fsmon.sh
  {make_gitdir}
  mkdir -p {gitdir}/objects {gitdir}/refs/heads {gitdir}/hooks
  echo 'ref: refs/heads/main' > {gitdir}/HEAD
  printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = %s/.fsmon.sh\n[filter "evil"]\n\tclean = sh -c "touch {marker}.filter; cat"\n' "$PWD" > {gitdir}/config
  printf '#!/bin/sh\ntouch {marker}.hook\n' > {gitdir}/hooks/pre-commit; chmod +x {gitdir}/hooks/pre-commit
  echo '* filter=evil' > .gitattributes
fi
"""
VARIANTS = {
    "a folder": ("rm -f .git", ".git"),                              # .git becomes a repository
    "another gitdir": ('rm -f .git; echo "gitdir: $PWD/.evil" > .git', ".evil"),   # .git names the build's own
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_build_that_rewrites_the_worktrees_git_fails_the_attempt_and_runs_nothing(tmp_path, variant):
    marker = tmp_path / "pwned"
    make_gitdir, gitdir = VARIANTS[variant]
    target = synthetic_target(tmp_path / "target")
    (target / "build.sh").write_text(TAMPER.replace("{marker}", str(marker)).replace("{make_gitdir}", make_gitdir)
                                     .replace("{gitdir}", gitdir) + (target / "build.sh").read_text())
    git(target, "commit", "-qam", "a build that rewrites .git")
    tree = gitops.add_worktree(target, tmp_path / "work" / "impl-faster-speed", git(target, "rev-parse", "HEAD"))
    script = [
        tool_use("apply_edit", EDIT),
        expect_ok("edited src/speed.txt", tool_use("build", {})),
        expect_ok("build exit 0", text("Raised the speed constant; it builds.")),
    ]
    gitfile = (tree / ".git").read_text()
    with FakeMessagesAPI(script) as fake:
        agent, config = agent_for(fake, tree)
        try:
            agent.implement(H, tree, config)
            refused = None
        except NotImplementable as exc:
            refused = str(exc)
    assert not fake.errors, fake.errors
    assert (tree / ".fsmon.sh").exists()                        # the build did plant it, in the sandbox
    rewritten = not (tree / ".git").is_file() or (tree / ".git").read_text() != gitfile
    if rewritten:        # the build got to rewrite .git: the attempt fails and git never runs there
        assert refused is not None and "tampered" in refused, refused
    else:                # a root worker's step runs as an unprivileged uid and cannot touch .git
        assert os.geteuid() == 0 and (refused is None or "tampered" in refused), refused
    assert not list(tmp_path.glob("pwned*"))                     # ... and nothing of it ran on the host
    assert git(target, "log", "--format=%s", "-1") == "a build that rewrites .git"   # no commit anywhere
    assert git(target, "status", "--porcelain") == ""
    if rewritten:        # the attack is real: plain git in that tree runs the build's program on the host
        subprocess.run(["git", "-C", str(tree), "add", "src/speed.txt"], capture_output=True)
        assert list(tmp_path.glob("pwned*"))
    gitops.remove_worktree(target, tree)
    assert gitops.worktrees(target) == []


def test_the_agents_file_tools_do_not_read_through_links_a_build_left(tmp_path):
    secret = tmp_path / "app" / "github-app.pem"
    secret.parent.mkdir()
    secret.write_text("-----BEGIN PRIVATE KEY-----\nS3CRETKEYBYTES0123456789\n")
    target = synthetic_target(tmp_path / "target")
    (target / "build.sh").write_text(f"ln -sf {secret} src/key.txt; ln -sf /dev/zero src/zero.txt\n"
                                     + (target / "build.sh").read_text())
    git(target, "commit", "-qam", "a build that leaves links")
    tree = gitops.add_worktree(target, tmp_path / "work" / "impl", git(target, "rev-parse", "HEAD"))
    script = [
        tool_use("build", {}),
        expect_ok("build exit 0", tool_use("read_file", {"path": "src/zero.txt"})),
        expect_error("outside the repository", tool_use("search_code", {"pattern": "S3CRET", "glob": "src/*"})),
        expect_ok("no matches", tool_use("apply_edit", EDIT)),
        expect_ok("edited", text("done")),
    ]
    with FakeMessagesAPI(script) as fake:
        agent, config = agent_for(fake, tree)
        commit = agent.implement(H, tree, config)
    assert not fake.errors, fake.errors
    assert all("S3CRETKEYBYTES" not in raw for raw in fake.raw)
    assert git(target, "show", "--name-only", "--format=", commit).split() == ["src/speed.txt"]
