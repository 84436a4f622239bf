"""Bad input is refused before anything is built or measured (jobs.run.preflight, jobs.cli): exit 2, one
line per problem saying what, where and the fix, no traceback, no run folder written. Real git."""
from __future__ import annotations

import subprocess

import pytest

from conftest import git, make_repo
from jobs import cli
from jobs.guard import gitops
from jobs.contract import ledger
from jobs.run import preflight
from jobs.contract.config import load_config
from synthetic import FILES, patch_for, synthetic_target


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    try:
        rc = cli.main(list(argv))
    except SystemExit as exc:          # argparse's own errors
        rc = exc.code
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "Traceback" not in text
    return rc, " ".join(text.split())  # rich folds long lines; the words are what matter


@pytest.mark.parametrize("value, words", [("-3", "-3 pairs cannot measure anything; fix:"),
                                          ("0", "0 pairs cannot measure anything; fix:"),
                                          ("many", "'many' is not a whole number; fix:")])
def test_repeats_must_be_a_positive_number(tmp_path, capsys, value, words):
    repo = synthetic_target(tmp_path / "t")
    rc, text = run_cli(capsys, "run", str(repo), "--repeats", value, "--out", str(tmp_path / "o"))
    assert rc == 2 and words in text and "--repeats" in text
    assert not (tmp_path / "o").exists()


def test_out_naming_a_file_is_refused(tmp_path, capsys):
    repo = synthetic_target(tmp_path / "t")
    (tmp_path / "taken").write_text("mine\n")
    rc, text = run_cli(capsys, "run", str(repo), "--out", str(tmp_path / "taken"))
    assert rc == 2 and f"--out {tmp_path / 'taken'}: is a file, not a directory; fix:" in text
    assert (tmp_path / "taken").read_text() == "mine\n"


def test_missing_path_not_a_repo_and_empty_repo_each_say_so(tmp_path, capsys):
    rc, text = run_cli(capsys, "run", str(tmp_path / "nowhere"))
    assert rc == 2 and "no such directory; fix:" in text and "not a git repository" not in text
    (tmp_path / "plain").mkdir()
    rc, text = run_cli(capsys, "calibrate", str(tmp_path / "plain"))
    assert rc == 2 and "not a git repository" in text and "fix: git -C" in text
    (tmp_path / "empty").mkdir()
    git(tmp_path / "empty", "init", "-q")
    rc, text = run_cli(capsys, "research", str(tmp_path / "empty"))
    assert rc == 2 and "has no commits yet" in text and "fix: git -C" in text and "rev-parse" not in text


def test_a_config_type_error_names_field_and_fix(tmp_path, capsys):
    files = {**FILES, ".github/autoresearch.yml": FILES[".github/autoresearch.yml"].replace(
        "repeats: {min: 3, max: 40,", "repeats: {min: 3, max: lots,")}
    repo = make_repo(tmp_path / "t", files)
    rc, text = run_cli(capsys, "run", str(repo), "--out", str(tmp_path / "o"))
    assert rc == 2 and "repeats.max: Input should be a valid integer" in text and "fix: write a whole number" in text
    assert not (tmp_path / "o").exists()


def test_every_bad_candidate_and_glob_is_listed_before_any_measurement(tmp_path, capsys):
    files = {**FILES, ".github/autoresearch.yml": FILES[".github/autoresearch.yml"].replace(
        'editable: ["src/**"]', 'editable: ["src/**", "lib/**"]')}
    repo = make_repo(tmp_path / "t", files)
    (tmp_path / "notes.patch").write_text("this is not a diff\n")
    stale = patch_for(repo, tmp_path / "stale.patch", {"src/speed.txt": "105\n"})
    (repo / "src/speed.txt").write_text("101\n")
    git(repo, "commit", "-qam", "the base moved on")
    yardstick = patch_for(repo, tmp_path / "yardstick.patch", {"bench.sh": "echo METRIC score=1e9\n"})
    rc, text = run_cli(capsys, "run", str(repo), "--agent", "none", "--out", str(tmp_path / "o"),
                       "--candidate", str(tmp_path / "notes.patch"), "--candidate", str(stale),
                       "--candidate", str(yardstick), "--candidate", str(tmp_path / "absent.patch"))
    assert rc == 2
    assert "editable: 'lib/**' matches no file in the base commit" in text
    assert "notes.patch: not a patch git can read; fix: give the output of `git diff` or `git format-patch`" in text
    assert "stale.patch: does not apply to the base commit" in text and "src/speed.txt" in text
    assert "yardstick.patch: touches bench.sh" in text and "fix: leave that file out" in text
    assert "absent.patch: no such file" in text
    assert not (tmp_path / "o" / "state.json").exists()


def test_git_diff_and_format_patch_output_both_pass(tmp_path):
    repo = synthetic_target(tmp_path / "t")
    diff = patch_for(repo, tmp_path / "faster.patch", {"src/speed.txt": "110\n", "src/new.c": "int x;\n"})
    (repo / "src/speed.txt").write_text("120\n")
    git(repo, "commit", "-qam", "faster still")
    mail = subprocess.run(["git", "-C", str(repo), "format-patch", "-1", "--stdout"], capture_output=True,
                          text=True, check=True).stdout
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    (tmp_path / "mail.patch").write_text(mail)
    preflight.check_run(repo, load_config(repo), candidates=[diff, tmp_path / "mail.patch"], out=None)


def test_the_candidate_is_checked_against_the_committed_base_not_the_work_tree(tmp_path):
    repo = synthetic_target(tmp_path / "t")
    patch = patch_for(repo, tmp_path / "p.patch", {"src/speed.txt": "110\n"})
    (repo / "src/speed.txt").write_text("uncommitted edit\n")     # the run uses the committed tree
    preflight.check_run(repo, load_config(repo), candidates=[patch], out=None)


def test_a_run_folder_of_another_target_or_an_older_commit_is_named_and_left_alone(tmp_path, capsys):
    """Two variants of one matrix cell given the same --out: the second used to die in git ("not a
    tree object", looking up the first one's base in its own repository)."""
    first = synthetic_target(tmp_path / "first")
    other = make_repo(tmp_path / "other", {**FILES, "src/code.c": "int main(void) { return 1; }\n"})
    base = gitops.head_commit(first)
    out = tmp_path / "runs" / "cell"
    out.mkdir(parents=True)
    ledger.save_state(out, {"run_id": "20261203-193954-abc1234", "base_commit": base, "target": str(first),
                            "phase": "experiments"})
    kept = (out / "state.json").read_bytes()
    preflight.check_run(first, load_config(first), candidates=[], out=out)     # its own run: resumes

    rc, text = run_cli(capsys, "run", str(other), "--out", str(out))
    assert rc == 2 and "not a tree object" not in text
    assert (f"--out {out}: holds run 20261203-193954-abc1234 of {first}, started at {base[:12]}, and {other} is at "
            f"{gitops.head_commit(other)[:12]}; a run's folder resumes only that run") in text
    assert "fix: give this run another --out" in text and "check out" not in text

    (first / "src" / "speed.txt").write_text("101\n")
    git(first, "commit", "-qam", "one commit on")
    rc, text = run_cli(capsys, "run", str(first), "--out", str(out))
    assert rc == 2 and f"holds run 20261203-193954-abc1234 started at {base[:12]}, and {first} is at" in text
    assert f"or check out {base[:12]} to resume the run" in text
    assert (out / "state.json").read_bytes() == kept and sorted(p.name for p in out.iterdir()) == ["state.json"]
