"""examples/llama.cpp/sim.sh, the llama.cpp contract's deterministic yardstick (issue 26): its build step
does nothing unless a reduced model is named, builds the copy Valgrind can count on each machine (AVX2 on
x86-64, armv8.2-a+dotprod on arm64 once a probe shows the installed Valgrind runs an SDOT) or says why
not before configuring anything, and its run step says what is missing instead of letting cachegrind
count a failed process. The real build and cachegrind run are exercised by `SIM=1 matrix.sh run`
(examples/llama.cpp/README.md); here stand-ins record what they were called with."""
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


def stand_ins(tmp_path: Path, machine: str, valgrind: str) -> dict[str, str]:
    """uname, cc, valgrind and cmake that record what sim.sh asked of them (cmake configures nothing)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "uname").write_text(f"#!/bin/sh\necho {machine}\n")
    (tools / "cc").write_text('#!/bin/sh\necho "$@" >> cc-args\n'
                              'while [ $# -gt 1 ]; do [ "$1" = -o ] && touch "$2"; shift; done\n')
    (tools / "valgrind").write_text(valgrind)
    (tools / "cmake").write_text('#!/bin/sh\necho "$@" >> cmake-args\n')
    for tool in tools.iterdir():
        tool.chmod(0o755)
    return {"AUTORESEARCH_SIM_MODEL": "m.gguf", "PATH": f"{tools}:{os.environ['PATH']}"}


# Debian 12's Valgrind 3.19 on arm64 (seen under qemu-aarch64): an SDOT stops the client with SIGILL
OLD_VALGRIND = """#!/bin/sh
[ "$1" = --version ] && { echo valgrind-3.19.0; exit 0; }
echo "disInstr(arm64): unhandled instruction 0x4E829420" >&2
kill -ILL $$
"""
NEW_VALGRIND = '#!/bin/sh\n[ "$1" = --version ] && { echo valgrind-3.27.1; exit 0; }\necho "$@" >> valgrind-args\n'


def test_build_on_arm_refuses_a_valgrind_that_cannot_run_sdot_before_configuring_anything(tmp_path):
    env = stand_ins(tmp_path, "aarch64", OLD_VALGRIND)
    done = sim(tmp_path, "build", **env)
    assert done.returncode == 3, done.stderr
    assert "valgrind-3.19.0 cannot run the dot-product instruction (SDOT)" in done.stderr
    assert "unhandled instruction 0x4E829420" in done.stderr and "3.23 or newer" in done.stderr
    assert "remove simulate:" in done.stderr and "Illegal instruction" not in done.stderr
    assert "-march=armv8.2-a+dotprod" in (tmp_path / "cc-args").read_text()     # the probe was built for the copy
    assert not (tmp_path / "cmake-args").exists() and not (tmp_path / "build-sim").exists()


def test_build_on_arm_configures_the_dotprod_copy_when_valgrind_runs_it(tmp_path):
    env = stand_ins(tmp_path, "aarch64", NEW_VALGRIND)
    done = sim(tmp_path, "build", **env)
    # the stand-in cmake built no libraries, so linking llama-digest stops, naming what is missing
    assert done.returncode == 3 and "libllama.a not found" in done.stderr, done.stderr
    configure = (tmp_path / "cmake-args").read_text().splitlines()[0].split()
    assert "-DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod" in configure and "-DGGML_NATIVE=OFF" in configure
    assert not [a for a in configure if "AVX" in a]
    assert "--tool=none" in (tmp_path / "valgrind-args").read_text()


def test_build_on_x86_configures_the_avx2_copy_without_asking_valgrind(tmp_path):
    env = stand_ins(tmp_path, "x86_64", OLD_VALGRIND)
    done = sim(tmp_path, "build", **env)
    assert done.returncode == 3 and "libllama.a not found" in done.stderr, done.stderr
    configure = (tmp_path / "cmake-args").read_text().splitlines()[0].split()
    assert "-DGGML_AVX2=ON" in configure and "-DGGML_AVX512=OFF" in configure and "-DGGML_NATIVE=OFF" in configure
    assert configure.index("-DGGML_AVX2=OFF") < configure.index("-DGGML_AVX2=ON")
    assert not [a for a in configure if "ARM_ARCH" in a] and not (tmp_path / "cc-args").exists()


def test_build_refuses_another_machine_before_configuring_anything(tmp_path):
    env = stand_ins(tmp_path, "riscv64", NEW_VALGRIND)
    done = sim(tmp_path, "build", **env)
    assert done.returncode == 3 and "not riscv64" in done.stderr and "remove simulate:" in done.stderr
    assert not (tmp_path / "cmake-args").exists()


def test_run_names_what_is_missing(tmp_path):
    assert "AUTORESEARCH_SIM_MODEL is not set" in sim(tmp_path, "run").stderr
    model = tmp_path / "m.gguf"
    gone = sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model))
    assert gone.returncode == 3 and "not found" in gone.stderr
    model.write_bytes(b"GGUF")
    unbuilt = sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model))
    assert unbuilt.returncode == 3 and "build-sim/bin/llama-digest not found" in unbuilt.stderr
    assert sim(tmp_path, "nonsense").returncode == 2


def test_run_is_one_single_threaded_digest_process_on_the_avx2_copy(tmp_path):
    # llama-digest, not llama-bench: the counted process prints what it computed (DIGEST), so a
    # candidate cannot be fast where the yardstick counts and correct where something else checks
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    digest = tmp_path / "build-sim" / "bin" / "llama-digest"
    digest.parent.mkdir(parents=True)
    digest.write_text('#!/bin/sh\necho "$@" > called\necho "DIGEST logits=00ff"\n')
    digest.chmod(0o755)
    done = sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model), AUTORESEARCH_THREADS="2", AUTORESEARCH_SEED="99")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "DIGEST logits=00ff\n"
    # MODEL SEED n_prompt n_gen threads fa; -t 1 whatever the benchmark's threads: a spinning pool
    # would count differently per run
    assert (tmp_path / "called").read_text().split() == [str(model), "99", "64", "0", "1", "-1"]
    bad = sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model), AUTORESEARCH_SIM_PROMPT="64; rm -rf /")
    assert bad.returncode == 3 and "positive number" in bad.stderr
    tg = sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model), AUTORESEARCH_SIM_GEN="16", AUTORESEARCH_FA="on")
    # generation: a one-token prompt, then 16 tokens one at a time
    assert tg.returncode == 0 and (tmp_path / "called").read_text().split()[1:] == ["1", "1", "16", "1", "1"]
    assert sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model), AUTORESEARCH_SIM_GEN="x").returncode == 3
    assert "AUTORESEARCH_SEED must be a number" in sim(tmp_path, "run", AUTORESEARCH_SIM_MODEL=str(model),
                                                       AUTORESEARCH_SEED="x").stderr


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


def test_digest_build_names_a_missing_library_and_its_usage(tmp_path):
    script = ROOT / "examples" / "llama.cpp" / "digest.sh"
    done = subprocess.run(["bash", str(script), "build", "build"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 3 and "build/src/libllama.a not found" in done.stderr
    assert subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60).returncode == 2
