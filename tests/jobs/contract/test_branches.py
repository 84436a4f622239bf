"""The run's branch names come from one place (`jobs.contract.branches`): every other module asks it."""
from __future__ import annotations

import ast

import pytest

from conftest import ROOT
from jobs.contract import branches


def test_a_run_and_its_experiments_are_found_again_by_their_names():
    run, exp = branches.run_branch("12-abc1234"), branches.experiment_branch("12-abc1234", "h3")
    assert exp.startswith(branches.experiments_prefix("12-abc1234")) and not run.startswith(exp)
    assert branches.run_of(run) == branches.run_of(exp) == "12-abc1234"
    assert branches.is_run_made(run) and branches.is_run_made(exp)
    assert not branches.is_run_made("feature/autoresearch/x") and not branches.is_run_made(branches.PREFIX)


@pytest.mark.parametrize("call", [lambda: branches.run_branch(""), lambda: branches.experiment_branch("r", ""),
                                  lambda: branches.run_of("main")])
def test_bad_names_are_refused_with_a_reason(call):
    with pytest.raises(ValueError, match="run|hypothesis"):
        call()


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return {id(n.body[0].value) for n in nodes if n.body and isinstance(n.body[0], ast.Expr)}


def test_no_other_module_spells_a_branch_name():
    offenders = []
    for path in sorted([*(ROOT / "jobs").rglob("*.py"), *(ROOT / "bot").rglob("*.py")]):
        if path == ROOT / "jobs" / "contract" / "branches.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        offenders += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
                      and n.value.startswith(branches.PREFIX)]
    assert offenders == []
