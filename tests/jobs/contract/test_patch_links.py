"""The guard's rule for symbolic links in patches (issue 20, N7): a patch may delete a link, and may
not create, retarget, rename or copy one, nor write under a `.git` folder in any letter case. Real
`git diff` output of real changes; the refused ones are also shown to be patches git would apply."""
from __future__ import annotations

import shutil

import pytest

from conftest import git, make_repo
from jobs.guard import gitops
from jobs.agent.guard import EditRefused, check_edit, check_patch
from jobs.contract.config import parse_config

CONFIG = """
build: make -C src
benchmark: ./bench.sh
checks: ./bench.sh
metrics: [{name: tg, primary: true}]
editable: ["src/**"]
"""


@pytest.fixture()
def tree(tmp_path):
    t = make_repo(tmp_path / "t", {".github/autoresearch.yml": CONFIG, "bench.sh": "echo\n", "src/a.c": "int a;\n",
                                   "src/sub/b.c": "int b;\n"})
    (t / "src" / "alias.c").symlink_to("a.c")
    git(t, "add", "-A")
    git(t, "commit", "-qm", "a link the repository itself has")
    return t


def patch_of(tree, tmp_path, change) -> str:
    work = tmp_path / "scratch"
    shutil.copytree(tree, work, symlinks=True)
    change(work)
    git(work, "add", "-A")
    return git(work, "diff", "--cached", "-M", "--binary") + "\n"


def retarget(w):
    (w / "src" / "alias.c").unlink()
    (w / "src" / "alias.c").symlink_to("/run/secrets/github-app.pem")


def move(w):
    (w / "src" / "alias.c").rename(w / "src" / "sub" / "alias.c")      # now it names src/sub/a.c


def file_to_link(w):
    (w / "src" / "a.c").unlink()
    (w / "src" / "a.c").symlink_to("sub/b.c")


@pytest.mark.parametrize("change", [
    lambda w: (w / "src" / "new.c").symlink_to("a.c"),                  # even inside the editable paths
    retarget, move, file_to_link,
])
def test_a_patch_that_makes_or_changes_a_link_is_refused(tree, tmp_path, change):
    patch = patch_of(tree, tmp_path, change)
    with pytest.raises(EditRefused, match="symbolic link"):
        check_patch(patch, tree, parse_config(CONFIG))
    scratch = gitops.add_worktree(tree, tmp_path / "apply", "HEAD")
    gitops.apply_patch(scratch, patch)                                 # git itself would have applied it
    gitops.remove_worktree(tree, scratch)


def test_a_patch_that_deletes_a_link_or_turns_one_into_a_file_passes(tree, tmp_path):
    def change(w):
        (w / "src" / "alias.c").unlink()
        (w / "src" / "a.c").write_text("int a = 1;\n")
    assert set(check_patch(patch_of(tree, tmp_path, change), tree, parse_config(CONFIG))) == {"src/alias.c", "src/a.c"}

    def unlink_to_file(w):
        (w / "src" / "alias.c").unlink()
        (w / "src" / "alias.c").write_text("int alias;\n")
    assert check_patch(patch_of(tree, tmp_path / "2", unlink_to_file), tree, parse_config(CONFIG)) == ["src/alias.c"]


@pytest.mark.parametrize("path", ["src/.git/config", "src/.GIT/hooks/pre-commit", ".Git/config"])
def test_no_edit_reaches_a_git_folder_in_any_letter_case(tree, path):
    with pytest.raises(EditRefused, match="outside the target tree"):
        check_edit(path, tree, parse_config(CONFIG))
