"""examples/llama.cpp/sim.sh, the llama.cpp contract's deterministic yardstick (issue 26): its build step
does nothing unless a reduced model is named, and its run step says what is missing instead of letting
cachegrind count a failed process. The real build and cachegrind run are exercised by `SIM=1 matrix.sh run`
(examples/llama.cpp/README.md); here a stand-in llama-bench records what it was called with."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import ROOT

SCRIPT = ROOT / "examples" / "llama.cpp" / "sim.sh"


def sim(tree: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AUTORESEARCH_")}
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=tree, env={**clean, **env}, capture_output=True,
                          text=True, timeout=60)


def test_build_does_nothing_without_a_reduced_model(tmp_path):
    done = sim(tmp_path, "build")
    assert done.returncode == 0 and not (tmp_path / "build-sim").exists()


def test_run_names_what_is_missing(tmp_path):
    assert "AUTORESEARCH_SIM_MODEL is not set" in sim(tmp_path, "run").stderr
    model = tmp_path / "m.gguf"
    gone = sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model))
    assert gone.returncode == 3 and "not found" in gone.stderr
    model.write_bytes(b"GGUF")
    unbuilt = sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model))
    assert unbuilt.returncode == 3 and "build-sim/bin/llama-bench not found" in unbuilt.stderr
    assert sim(tmp_path, "nonsense").returncode == 2


def test_run_is_one_single_threaded_prompt_process_on_the_avx2_copy(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    bench = tmp_path / "build-sim" / "bin" / "llama-bench"
    bench.parent.mkdir(parents=True)
    bench.write_text('#!/bin/sh\necho "$@" > called\n')
    bench.chmod(0o755)
    done = sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model), AUTORESEARCH_THREADS="2")
    assert done.returncode == 0, done.stderr
    # -t 1 whatever the benchmark's threads: a spinning pool would count differently per run
    assert (tmp_path / "called").read_text().split() == ["-m", str(model), "-p", "64", "-n", "0", "-r", "1",
                                                         "-t", "1", "-fa", "auto", "-o", "json"]
    bad = sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model), AUTORESEARCH_SIM_PROMPT="64; rm -rf /")
    assert bad.returncode == 3 and "positive number" in bad.stderr
    tg = sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model), AUTORESEARCH_SIM_GEN="16")
    assert tg.returncode == 0 and (tmp_path / "called").read_text().split()[2:6] == ["-p", "0", "-n", "16"]
    assert sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model), AUTORESEARCH_SIM_GEN="x").returncode == 3


def test_checks_run_the_ops_on_the_copy_the_yardstick_counts_and_fail_when_one_fails(tmp_path):
    # a candidate could skip work on the AVX2 path alone: the copy that is counted must be checked too
    assert sim(tmp_path, "checks", "SOFT_MAX").returncode == 0          # no yardstick: nothing to check
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "cmake").write_text("#!/bin/sh\nexit 0\n")
    (tools / "cmake").chmod(0o755)
    binary = tmp_path / "build-sim" / "bin" / "test-backend-ops"
    binary.parent.mkdir(parents=True)
    binary.write_text('#!/bin/sh\necho "$5" >> ran\n[ "$5" != RMS_NORM ] || { echo "1/2 backends passed"; exit 1; }\n')
    binary.chmod(0o755)
    env = {"AUTORESEARCH_SIM_MODEL": "m.gguf", "PATH": f"{tools}:{os.environ['PATH']}"}
    ok = sim(tmp_path, "checks", "SOFT_MAX", "MUL_MAT_VEC_FUSION", **env)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "ran").read_text().split() == ["SOFT_MAX", "MUL_MAT_VEC_FUSION"]
    failed = sim(tmp_path, "checks", "SOFT_MAX", "RMS_NORM", **env)
    assert failed.returncode != 0 and "1/2 backends passed" in failed.stdout
    assert sim(tmp_path, "checks", **env).returncode == 2
