"""examples/llama.cpp/matrix.sh's bookkeeping (issue 27): runs stage their reports in a folder named
after the machine's ISA and never write into the committed results; `publish` copies only a
finished run, whole; every cell (pp512only included) is listed; a local llama.cpp tree is usable.
The llama.cpp run itself is replaced by a stand-in `autoresearch` (the script is what is tested)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import ROOT, make_repo
from jobs.measure.hostfacts import machine_facts

SCRIPT = ROOT / "examples" / "llama.cpp" / "matrix.sh"
STAND_IN = """#!/usr/bin/env bash
# a stand-in for `autoresearch run TARGET --out DIR ...`: writes a run's report files
out=""; while [ $# -gt 0 ]; do [ "$1" = --out ] && out="$2"; shift; done
mkdir -p "$out"
for f in pr.md research.md summary.json hypotheses.json experiments.jsonl; do echo "$f of this run" > "$out/$f"; done
exit "${STAND_IN_RC:-0}"
"""


def setup_env(tmp: Path) -> dict[str, str]:
    tools = tmp / "bin"
    tools.mkdir()
    for name in ("cmake", "ninja", "ccache"):
        (tools / name).write_text("#!/bin/sh\nexit 0\n")
        (tools / name).chmod(0o755)
    (tools / "autoresearch").write_text(STAND_IN)
    (tools / "autoresearch").chmod(0o755)
    cache = tmp / "cache"
    (cache / "models").mkdir(parents=True)
    (cache / "models" / "synthetic-qwen3-28L-q4_0.gguf").write_bytes(b"GGUF")
    make_repo(cache / "matrix" / "target-pp512only", {"README": "x"})
    return {**operator_free_environ(), "PATH": f"{tools}:{os.environ['PATH']}", "AUTORESEARCH_CACHE_ROOT": str(cache),
            "AUTORESEARCH": str(tools / "autoresearch"), "RESULTS": str(tmp / "published")}


# matrix.sh's own knobs: an operator who ran a cell from the same shell (WORK=... for a second set of
# targets) must not send these tests' runs into that folder
MATRIX_KNOBS = ("WORK", "SIM", "TOP", "TAG", "RESULTS", "LLAMA_TREE", "AUTORESEARCH_CFLAGS", "AUTORESEARCH_SIM_MODEL")


def operator_free_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in MATRIX_KNOBS}


def sh(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)


def test_cells_list_every_cell_with_the_prompt_only_ones():
    out = sh(operator_free_environ(), "cells").stdout.splitlines()
    names = [line.split(":")[0] for line in out]
    assert len(names) == 12 and "qwen3-t2-pp512only" in names and "tinyllama-t1-tg128" in names
    assert all("AUTORESEARCH_TG=off" in line for line in out if "pp512only:" in line)


def test_a_run_stages_under_its_isa_and_publish_copies_only_a_finished_run_whole(tmp_path):
    env = setup_env(tmp_path)
    isa = machine_facts()["isa"]
    published = tmp_path / "published"
    stale = published / f"qwen3-t1-pp512only-{isa}"
    stale.mkdir(parents=True)
    (stale / "old-only.md").write_text("from an earlier run")

    failed = sh({**env, "STAND_IN_RC": "3"}, "run", "qwen3-t1-pp512only", "--repeats", "4")
    assert failed.returncode == 3
    staged = tmp_path / "cache" / "matrix" / "results" / f"qwen3-t1-pp512only-{isa}"
    command = (staged / "command.txt").read_text()
    assert "--repeats 4" in command and "AUTORESEARCH_TG=off" in command and "# exit 3 " in command
    assert isa.upper() in command and "load" in command          # where it ran and how busy it was
    assert sorted(p.name for p in stale.iterdir()) == ["old-only.md"]     # committed folder untouched
    refused = sh(env, "publish", "qwen3-t1-pp512only")
    assert refused.returncode == 2 and "not a finished run" in refused.stderr

    assert sh(env, "run", "qwen3-t1-pp512only").returncode == 0
    assert sh(env, "publish", "qwen3-t1-pp512only").returncode == 0
    names = sorted(p.name for p in stale.iterdir())
    assert "old-only.md" not in names and {"pr.md", "summary.json", "command.txt"} <= set(names)


def test_targets_from_a_local_tree_and_a_clear_error_for_a_wrong_one(tmp_path):
    env = setup_env(tmp_path)
    tree = tmp_path / "llama"
    (tree / "ggml" / "src" / "ggml-cpu").mkdir(parents=True)
    (tree / "ggml" / "src" / "ggml-cpu" / "ops.cpp").write_text("// ops\n")
    env["WORK"] = str(tmp_path / "work")
    wrong = sh({**env, "LLAMA_TREE": str(tmp_path)}, "targets")
    assert wrong.returncode == 2 and "is not a llama.cpp tree" in wrong.stderr
    done = sh({**env, "LLAMA_TREE": str(tree)}, "targets")
    assert done.returncode == 0, done.stderr
    for primary in ("pp512", "tg128", "pp512only"):
        target = tmp_path / "work" / f"target-{primary}"
        assert (target / "ggml" / "src" / "ggml-cpu" / "ops.cpp").is_file()
        assert (target / ".github" / "autoresearch.yml").is_file()
    log = subprocess.run(["git", "-C", str(tmp_path / "work" / "target-pp512"), "log", "--format=%s"],
                         capture_output=True, text=True).stdout
    assert str(tree) in log


def test_the_script_allows_exactly_the_variables_the_example_config_asks_for():
    """Target code gets a variable only when the config asks and the operator allows (issue 20):
    the script is the operator of its runs and allows what the example's config asks, no more."""
    import re
    import yaml
    asked = yaml.safe_load((ROOT / "examples" / "llama.cpp" / "autoresearch.yml").read_text())["sandbox"]["env"]
    allowed = re.search(r"AUTORESEARCH_SANDBOX_ENV:-([A-Z_,]+)", SCRIPT.read_text()).group(1).split(",")
    assert sorted(allowed) == sorted(asked)


def test_candidate_writes_one_recipes_edits_as_a_patch_that_applies_to_the_targets(tmp_path):
    """`candidate RECIPE`: the patch `run CELL --agent none --candidate` measures alone. The target
    here holds only the real llama.cpp files the recipe edits."""
    import pytest

    from jobs.research.recipes import load_recipe_set, touched_files
    from llama_source import llama_cpp_tree
    tree = llama_cpp_tree()
    env = setup_env(tmp_path)
    recipe = next(r for r in load_recipe_set("llama.cpp") if r.id == "fa-tile-pack")
    target = tmp_path / "cache" / "matrix" / "target-pp512only"
    files = {rel: (tree / rel).read_text() for rel in touched_files(recipe)}
    if not files:
        pytest.skip("the recipe names no files")
    for rel, text in files.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_text(text)
    subprocess.run(["git", "-C", str(target), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(target), "-c", "user.name=t", "-c", "user.email=t@example.com",
                    "commit", "-qm", "the files the recipe edits"], check=True)
    done = sh(env, "candidate", "fa-tile-pack")
    assert done.returncode == 0, done.stderr
    patch = Path(done.stdout.strip())
    assert patch == tmp_path / "cache" / "matrix" / "candidates" / "fa-tile-pack.patch"
    text = patch.read_text()
    assert sorted(line[len("+++ b/"):] for line in text.splitlines() if line.startswith("+++ b/")) == sorted(files)
    check = subprocess.run(["git", "-C", str(target), "apply", "--check", str(patch)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert subprocess.run(["git", "-C", str(target), "status", "--porcelain"], capture_output=True,
                          text=True).stdout == ""          # the target itself is never edited

    unknown = sh(env, "candidate", "no-such-recipe")
    assert unknown.returncode == 2 and "no recipe 'no-such-recipe'" in unknown.stderr
    (target / "README").write_text("changed\n")       # a tree the recipe's anchors are not in
    for rel in files:
        (target / rel).write_text("nothing to find here\n")
    subprocess.run(["git", "-C", str(target), "commit", "-qam", "drifted", "--author", "t <t@example.com>"],
                   check=True, env={**os.environ, "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"})
    drifted = sh(env, "candidate", "fa-tile-pack")
    assert drifted.returncode == 2 and "anchor in" in drifted.stderr


def test_top_runs_a_committed_variant_of_the_target_that_tests_the_n_top_ranked_hypotheses(tmp_path):
    from jobs.contract.config import parse_config
    env = setup_env(tmp_path)
    shipped = (ROOT / "examples" / "llama.cpp" / "autoresearch.yml").read_text()
    prompt_only = "".join(l for l in shipped.splitlines(True) if '{name: tg128, direction: higher, unit: "t/s"}' not in l)
    target = tmp_path / "cache" / "matrix" / "target-pp512only"
    subprocess.run(["rm", "-rf", str(target)], check=True)
    make_repo(target, {".github/autoresearch.yml": prompt_only})

    assert sh({**env, "TOP": "2"}, "run", "qwen3-t1-pp512only").returncode == 0
    variant = tmp_path / "cache" / "matrix" / "target-pp512only-top2"
    config = parse_config((variant / ".github" / "autoresearch.yml").read_text())
    assert config.research.max_hypotheses == 2 and config.budget.max_experiments == 2
    assert 'test-backend-ops test -b CPU -o FLASH_ATTN_EXT -p "nb=75,"' in config.checks
    assert parse_config(prompt_only).research.max_hypotheses == 12        # the base target is left as it was
    status = subprocess.run(["git", "-C", str(variant), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == ""                                             # the variant is a commit, not an edit
    command = (tmp_path / "cache" / "matrix" / "results" / f"qwen3-t1-pp512only-{machine_facts()['isa']}"
               / "command.txt").read_text()
    assert command.splitlines()[1].startswith("TOP=2 ") and "the 2 top-ranked hypotheses" in command

    wrong = sh({**env, "TOP": "two"}, "run", "qwen3-t1-pp512only")
    assert wrong.returncode == 2 and "TOP=two is not a positive number" in wrong.stderr


def test_sim_runs_a_committed_variant_with_the_yardstick_and_stages_it_apart(tmp_path):
    from jobs.contract.config import parse_config
    env = setup_env(tmp_path)
    shipped = (ROOT / "examples" / "llama.cpp" / "autoresearch.yml").read_text()
    assert parse_config(shipped).simulate is None                          # off unless asked for
    target = tmp_path / "cache" / "matrix" / "target-pp512only"
    subprocess.run(["rm", "-rf", str(target)], check=True)
    make_repo(target, {".github/autoresearch.yml": shipped})

    missing = sh({**env, "SIM": "1"}, "run", "qwen3-t2-pp512only")
    assert missing.returncode == 2 and "needs the reduced model" in missing.stderr, missing.stderr
    (tmp_path / "cache" / "models" / "synthetic-qwen3-2L-q4_0.gguf").write_bytes(b"GGUF")
    done = sh({**env, "SIM": "1", "TOP": "3"}, "run", "qwen3-t2-pp512only")
    assert done.returncode == 0, done.stderr
    variant = tmp_path / "cache" / "matrix" / "target-pp512only-top3-sim"
    config = parse_config((variant / ".github" / "autoresearch.yml").read_text())
    assert config.simulate.command == "bash .github/autoresearch/sim.sh run" and config.simulate.separate_build
    assert config.research.max_hypotheses == 3 and "AUTORESEARCH_SIM_MODEL" in config.sandbox.env
    log = subprocess.run(["git", "-C", str(variant), "log", "-1", "--format=%s"], capture_output=True, text=True)
    assert "deterministic yardstick" in log.stdout and "3 top-ranked" in log.stdout
    staged = tmp_path / "cache" / "matrix" / "results" / f"qwen3-t2-pp512only-sim-{machine_facts()['isa']}"
    line = (staged / "command.txt").read_text().splitlines()[1]
    assert line.startswith("TOP=3 SIM=1 AUTORESEARCH_SIM_MODEL=") and "synthetic-qwen3-2L-q4_0.gguf" in line
    assert "AUTORESEARCH_SIM_GEN" not in line          # a prompt cell's yardstick processes a prompt
    assert sh({**env, "SIM": "1"}, "publish", "qwen3-t2-pp512only").returncode == 0
    assert (tmp_path / "published" / staged.name / "pr.md").exists()
    # TAG: the same cell published beside the earlier one, not over it
    assert sh({**env, "SIM": "1", "TAG": "digest"}, "publish", "qwen3-t2-pp512only").returncode == 0
    tagged = tmp_path / "published" / f"qwen3-t2-pp512only-sim-digest-{machine_facts()['isa']}"
    assert (tagged / "pr.md").exists() and (tmp_path / "published" / staged.name / "pr.md").exists()
    assert "TAG must be" in sh({**env, "TAG": "../x"}, "publish", "qwen3-t2-pp512only").stderr
    assert sh({**env, "SIM": "yes"}, "cells").returncode == 2


def test_setup_says_how_to_get_gguf_before_copying_anything(tmp_path):
    env = setup_env(tmp_path)
    no_gguf = tmp_path / "bin" / "python-without-gguf"
    no_gguf.write_text("#!/bin/sh\n[ \"$1\" = -c ] && case \"$2\" in *gguf*) exit 1;; esac\nexec python3 \"$@\"\n")
    no_gguf.chmod(0o755)
    done = sh({**env, "PYTHON": str(no_gguf)}, "setup")
    assert done.returncode == 2 and "cannot import gguf" in done.stderr and "pip install" in done.stderr, done.stderr
    assert not (tmp_path / "cache" / "matrix" / "target-pp512").exists()
