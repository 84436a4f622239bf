"""A candidate patch's file name names its experiment, and the experiment's commit is kept under a
git branch of that name (`jobs.contract.branches.experiment_branch`). A name git refuses (`my patch[1].patch`:
a space, a `[`) crashed the run midway at ea10b95 (issue finding A3); it is refused where candidates
enter (the CLI's preflight, the bot's preparation, the pipeline itself), before any work, with the
name, the reason and a fix."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import make_repo
from jobs.contract import branches
from jobs.contract.config import parse_config
from synthetic import patch_for

CONFIG_TEXT = """\
build: "true"
benchmark: echo METRIC speed=1
checks: "true"
metrics: [{name: speed, direction: higher, primary: true}]
editable: ["src/**"]
"""
NAMES = ["my patch[1]", "a~b", "a^", "a:b", "a?", "a*", "a\\b", "a..b", "a@{b", ".hidden", "x.", "x.lock", "a\tb",
         "a\x7fb", "ok-name", "v1.2", "é", "a@b", "@", "-dash", "x.lock.y", "a{b}", 'a"b', "a'b", "a$b", "a;b",
         "a`b", "a#b", "a,b", "a%b", "a<b>", "a|b", "fuse-main-12"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("name", NAMES)
def test_a_name_is_refused_exactly_when_git_refuses_the_branch_it_makes(name):
    ref = "refs/heads/" + branches.experiments_prefix("12-abc1234") + name
    git_ok = subprocess.run(["git", "check-ref-format", ref], capture_output=True).returncode == 0
    assert (branches.name_problem(name) == "") == git_ok, (name, branches.name_problem(name))


def test_a_slash_or_nothing_is_refused_too_and_the_branch_is_never_made_from_a_bad_name():
    assert "'/'" in branches.name_problem("a/b") and branches.name_problem("") == "is empty"
    with pytest.raises(ValueError, match=r"'my patch\[1\]' cannot name a git branch: it holds a space and '\['"):
        branches.experiment_branch("12-abc1234", "my patch[1]")


def test_the_reason_names_the_file_says_why_and_suggests_a_name():
    why = branches.candidate_problem("my patch[1].patch", "my patch[1]")
    assert "'my patch[1].patch'" in why and "holds a space and '['" in why and "my-patch-1.patch" in why
    assert branches.candidate_problem("ok.patch", "ok") == ""
    assert branches.candidate_problem("...patch", "..").endswith("e.g. to candidate-1.patch")


def repo_with_bad_candidate(tmp_path):
    repo = make_repo(tmp_path / "t", {".github/autoresearch.yml": CONFIG_TEXT, "src/a.txt": "1\n"})
    patches = tmp_path / "patches"
    patches.mkdir()
    return repo, patch_for(repo, patches / "my patch[1].patch", {"src/a.txt": "2\n"})


def test_the_clis_preflight_names_the_bad_candidate(tmp_path):
    from jobs.guard import gitops
    from jobs.run import preflight
    repo, bad = repo_with_bad_candidate(tmp_path)
    problems = preflight.candidate_problems(repo, gitops.head_commit(repo), [bad], parse_config(CONFIG_TEXT))
    assert len(problems) == 1 and problems[0].startswith(f"--candidate {bad}: the candidate patch 'my patch[1].patch'")
    assert "fix: rename the file, e.g. to my-patch-1.patch" in problems[0]


def test_the_pipeline_refuses_it_before_any_work(tmp_path):
    from jobs.contract.errors import RunError
    from jobs.run.pipeline import Run, RunOptions
    repo, bad = repo_with_bad_candidate(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(RunError, match=r"'my patch\[1\].patch' names its experiment 'my patch\[1\]'"):
        Run(RunOptions(target=repo, out=out, run_id="r1", agent="none", candidates=[bad])).execute()
    assert not out.exists() or not any(out.iterdir())          # nothing built, calibrated or branched
    assert subprocess.run(["git", "-C", str(repo), "branch", "--list", "autoresearch/*"], capture_output=True,
                          text=True).stdout == ""


def test_the_bots_preparation_refuses_it_before_research(tmp_path):
    from jobs import api
    from jobs.contract.layout import RunLayout
    layout = RunLayout(tmp_path / "work", "octo", "tiny", "1-aaaaaaa")
    repo, bad = repo_with_bad_candidate(tmp_path)
    shutil.copytree(repo, layout.clone)
    (layout.clone / api.CANDIDATES_DIR).mkdir(parents=True)
    shutil.copy(bad, layout.clone / api.CANDIDATES_DIR / bad.name)
    with pytest.raises(api.PlanError, match=r"'my patch\[1\].patch' .* \(in \.github/autoresearch/candidates\)"):
        api.prepare(layout, "a" * 40, parse_config(CONFIG_TEXT), "local")
    with pytest.raises(api.PlanError, match="holds a space"):
        api.prepare_candidates(layout, "a" * 40, [bad], "local")
