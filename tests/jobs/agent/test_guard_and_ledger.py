import json

import pytest

from jobs.contract import ledger
from jobs.agent.guard import EditRefused, check_edit
from jobs.contract.config import parse_config
from jobs.contract.model import ExperimentRecord
from conftest import make_repo

CONFIG = """
build: make -C src
benchmark: ./bench.sh --fast
checks: python3 tools/check.py
metrics: [{name: tg, primary: true}]
editable: ["src/**", "tools/**"]
"""


@pytest.fixture()
def tree(tmp_path):
    return make_repo(tmp_path / "t", {".github/autoresearch.yml": CONFIG, "bench.sh": "echo\n",
                                      "tools/check.py": "", "src/a.c": "", "README": ""})


def test_editable_allowed(tree):
    assert check_edit("src/a.c", tree, parse_config(CONFIG)) == "src/a.c"
    assert check_edit("./src/new/b.c", tree, parse_config(CONFIG)) == "src/new/b.c"


@pytest.mark.parametrize("path, why", [
    ("README", "outside the editable paths"),
    ("../escape.c", "outside the target tree"),
    ("src/../../x", "outside the target tree"),
    ("/etc/passwd", "outside the target tree"),
    ("bench.sh", "yardstick"),
    ("tools/check.py", "yardstick"),          # inside editable, but it is the checks script
    (".github/autoresearch.yml", "yardstick"),
    (".git/config", "outside the target tree"),
])
def test_refused(tree, path, why):
    with pytest.raises(EditRefused, match=why):
        check_edit(path, tree, parse_config(CONFIG))


def test_symlink_escape_refused(tree, tmp_path):
    (tree / "src" / "link").symlink_to(tmp_path)
    with pytest.raises(EditRefused, match="symlink"):
        check_edit("src/link/x.c", tree, parse_config(CONFIG))


def _rec(name, status="keep", kind="experiment"):
    return ExperimentRecord(run_id="r", name=name, hypothesis=name, platform="local", status=status,
                            reason="", kind=kind)


def test_ledger_append_read_and_torn_last_line(tmp_path):
    ledger.append(tmp_path, _rec("a"))
    ledger.append(tmp_path, _rec("b", "discard"))
    with (tmp_path / "experiments.jsonl").open("a") as fh:
        fh.write('{"run_id": "r", "name": "c", "sta')   # killed mid-write
    assert [r["name"] for r in ledger.read(tmp_path)] == ["a", "b"]
    assert set(ledger.finished(tmp_path)) == {"a@local", "b@local"}


def test_ledger_corrupt_middle_line_is_an_error(tmp_path):
    (tmp_path / "experiments.jsonl").write_text('{"name": "a"}\ngarbage\n{"name": "b"}\n')
    with pytest.raises(ledger.LedgerError, match=":2: not a JSON record"):
        ledger.read(tmp_path)


def test_state_is_replaced_atomically(tmp_path):
    ledger.save_state(tmp_path, {"phase": "research"})
    ledger.save_state(tmp_path, {"phase": "stack"})
    assert ledger.load_state(tmp_path) == {"phase": "stack"}
    assert not list(tmp_path.glob("*.tmp"))
    (tmp_path / "state.json").write_text("{")
    with pytest.raises(ledger.LedgerError, match="unreadable run state"):
        ledger.load_state(tmp_path)


def _patch_from(tree, tmp_path, change) -> str:
    """A real `git diff` of `change` applied to a scratch copy of `tree` (-M: renames as renames)."""
    import shutil
    from conftest import git
    work = tmp_path / "scratch"
    shutil.copytree(tree, work, symlinks=True)
    change(work)
    git(work, "add", "-A")
    return git(work, "diff", "--cached", "-M", "--binary") + "\n"


@pytest.mark.parametrize("change, why", [
    (lambda w: (w / "bench.sh").rename(w / "src" / "bench.sh"), "yardstick"),          # moved into src/
    (lambda w: (w / "tools" / "check.py").rename(w / "src" / "check.py"), "yardstick"),
    (lambda w: (w / "src" / "etc").symlink_to("/etc"), "symbolic link"),
    (lambda w: (w / "src" / "up").symlink_to("../../.."), "symbolic link"),
    (lambda w: (w / "src" / "b.sh").symlink_to("../bench.sh"), "symbolic link"),       # a handle on the yardstick
    (lambda w: (w / "src" / "r").symlink_to("../README"), "symbolic link"),
])
def test_patches_that_move_the_yardstick_or_link_out_are_refused(tree, tmp_path, change, why):
    from jobs.agent.guard import check_patch
    patch = _patch_from(tree, tmp_path, change)
    with pytest.raises(EditRefused, match=why):
        check_patch(patch, tree, parse_config(CONFIG))


def test_a_patch_inside_the_editable_paths_passes(tree, tmp_path):
    from jobs.agent.guard import check_patch

    def change(w):
        (w / "src" / "a.c").write_text("int a;\n")
        (w / "src" / "a.c").rename(w / "src" / "b.c")
    assert set(check_patch(_patch_from(tree, tmp_path, change), tree, parse_config(CONFIG))) == \
        {"src/a.c", "src/b.c"}
