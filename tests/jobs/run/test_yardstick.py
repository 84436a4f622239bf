"""The yardstick is declared and protected (issue 21): the benchmark's and checks' folders by
default, what the config adds, never overlapping `editable`, never edited. Real git, no builds."""
from __future__ import annotations

import pytest

from jobs.contract import yardstick
from jobs.agent.guard import EditRefused, check_edit, check_patch
from jobs.contract.config import load_config, parse_config
from jobs.run.preflight import PreflightError, check_run
from minicomp import BENCH, minicomp, scaled_print
from synthetic import patch_for
from test_preflight import run_cli

BASE = "build: make -s\nmetrics: [{name: m, primary: true}]\neditable: ['lib/**']\n"


def globs(config_text: str, files: set[str]) -> dict[str, str]:
    folders = {"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)}
    return {p.glob: p.why for p in yardstick.parts(parse_config(config_text), files.__contains__,
                                                   folders.__contains__)}


def test_the_benchmarks_folder_is_the_yardstick_even_when_it_names_a_built_file():
    got = globs(BASE + "benchmark: ./bench/bench --fast\nchecks: bash tests/run.sh\n",
                {"bench/bench.c", "tests/run.sh", "lib/x.c"})
    assert "bench/**" in got and "benchmark command" in got["bench/**"]
    assert "tests/**" in got and "tests/run.sh" in got
    assert ".github/autoresearch.yml" in got
    assert not any(g.startswith("lib") for g in got)


def test_a_command_at_the_root_protects_its_file_not_the_whole_tree():
    got = globs(BASE + "benchmark: ./bench.sh\nchecks: ./checks.sh\n", {"bench.sh", "checks.sh", "lib/x.c"})
    assert set(got) == {".github/autoresearch.yml", "bench.sh", "checks.sh"}


def test_the_config_names_more_and_words_that_are_not_paths_are_ignored():
    text = (BASE + "benchmark: CCACHE_DIR=$HOME/x bash .github/autoresearch/bench.sh -n 3 /usr/bin/true\n"
            "checks: build/bin/test-ops -b CPU\nyardstick: ['driver/**']\n")
    got = globs(text, {".github/autoresearch/bench.sh", "driver/main.c", "lib/x.c"})
    assert set(got) == {".github/autoresearch.yml", ".github/autoresearch/bench.sh", ".github/autoresearch/**",
                        "driver/**"}


def test_an_editable_glob_that_reaches_into_the_yardstick_is_refused_before_anything_runs(tmp_path, capsys):
    # The maintainer's common setting on a library with its own bench/bench.c.
    repo = minicomp(tmp_path / "lib", editable='["**/*.c", "lib/**"]')
    rc, text = run_cli(capsys, "run", str(repo), "--agent", "none", "--out", str(tmp_path / "o"),
                       "--candidate", str(tmp_path / "absent.patch"))
    assert rc == 2
    assert "editable: '**/*.c' includes bench/bench.c" in text and "part of the yardstick (bench/**" in text
    assert "fix: narrow editable" in text and "move the benchmark's files out of the editable paths" in text
    assert "'lib/**' includes" not in text
    assert not (tmp_path / "o").exists()


def test_a_patch_to_the_benchmark_source_is_refused_with_the_reason(tmp_path):
    repo = minicomp(tmp_path / "lib")
    config = load_config(repo)
    cheat = patch_for(repo, tmp_path / "scale.patch", {"bench/bench.c": scaled_print(BENCH)})
    with pytest.raises(EditRefused, match=r"bench/bench.c: part of the yardstick \(bench/\*\*"):
        check_patch(cheat.read_text(), repo, config)
    with pytest.raises(PreflightError, match="scale.patch: touches bench/bench.c: part of the yardstick"):
        check_run(repo, config, candidates=[cheat], out=None)
    # Even an editable glob that covers it does not open the yardstick to edits.
    wide = config.model_copy(update={"editable": ["**"]})
    with pytest.raises(EditRefused, match="yardstick"):
        check_edit("bench/new_timer.c", repo, wide)
    assert check_edit("lib/rle.c", repo, config) == "lib/rle.c"


def test_a_pair_cap_in_which_nothing_can_be_kept_is_refused(tmp_path, capsys):
    repo = minicomp(tmp_path / "lib")
    rc, text = run_cli(capsys, "run", str(repo), "--agent", "none", "--repeats", "5", "--out", str(tmp_path / "o"),
                       "--candidate", str(tmp_path / "absent.patch"))
    assert rc == 2 and "--repeats 5: no keep is possible in 5 pairs" in text and "fix: --repeats 7 or more" in text
    check_run(repo, load_config(repo), candidates=[], out=None, repeats=7)
