"""examples/llama.cpp/bench.sh: one `llama-digest --bench` process -> a METRIC and a DIGEST line per
test, checked before they are passed on.

A stand-in llama-digest (a shell script) records its arguments and prints what the real one prints
(digest.cpp's bench mode) or something broken. It checks that the pair's seed, the benchmark's threads
and flash-attention setting reach the timed process, that AUTORESEARCH_TG=off runs the prompt only,
and that a rate without the digest of what was timed, a duplicated or missing test, a non-positive
rate or a failed process is not a sample (exit non-zero, saying what is wrong). The real program runs
in `matrix.sh run` (examples/llama.cpp/README.md, "The timed process is the checked one").
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "examples" / "llama.cpp" / "bench.sh"

FAKE = r"""#!/usr/bin/env bash
# arguments as bench.sh gives them: --bench MODEL SEED 512 N_GEN THREADS FA
echo "$@" > "$(dirname "$0")/argv"
gen="$5"
case "${FAKE_MODE:-ok}" in
  fail) echo "llama-digest: logit 3 of position 511 is not finite (nan)" >&2; exit 1 ;;
  no-digest) echo "METRIC pp512=55.250"; exit 0 ;;
  twice) echo "METRIC pp512=55.250"; echo "DIGEST pp512=00112233445566ff"; echo "METRIC pp512=56.000"; exit 0 ;;
  zero) echo "METRIC pp512=0.000"; echo "DIGEST pp512=00112233445566ff"; exit 0 ;;
  no-tg) echo "METRIC pp512=55.250"; echo "DIGEST pp512=00112233445566ff"; exit 0 ;;
esac
echo "llama-digest: pp512 9.3 s timed" >&2
echo "METRIC pp512=55.250"
echo "DIGEST pp512=00112233445566ff"
if [ "$gen" != 0 ]; then
  echo "some chatter"
  echo "METRIC tg128=40.500"
  echo "DIGEST tg128=ffeeddccbbaa9988"
fi
"""


@pytest.fixture()
def fake(tmp_path):
    exe = tmp_path / "llama-digest"
    exe.write_text(FAKE)
    exe.chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    return exe, model


def _run(fake, **env):
    exe, model = fake
    full = {**os.environ, "AUTORESEARCH_LLAMA_DIGEST": str(exe), "AUTORESEARCH_MODEL": str(model), **env}
    return subprocess.run(["bash", str(BENCH)], capture_output=True, text=True, timeout=60, env=full)


def _argv(fake):
    return (fake[0].parent / "argv").read_text().split()


def test_both_tests_with_the_digest_of_what_each_timed(fake):
    proc = _run(fake)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["METRIC pp512=55.250", "DIGEST pp512=00112233445566ff",
                                        "METRIC tg128=40.500", "DIGEST tg128=ffeeddccbbaa9988"]
    assert _argv(fake) == ["--bench", str(fake[1]), "1", "512", "128", "1", "-1"]   # seed 1, one thread, auto


def test_the_timed_process_gets_the_pairs_seed_threads_and_attention(fake):
    proc = _run(fake, AUTORESEARCH_SEED="4242", AUTORESEARCH_THREADS="2", AUTORESEARCH_FA="off")
    assert proc.returncode == 0, proc.stderr
    assert _argv(fake)[2:] == ["4242", "512", "128", "2", "0"]
    assert _run(fake, AUTORESEARCH_FA="on").returncode == 0 and _argv(fake)[-1] == "1"


def test_generation_off_runs_the_prompt_only(fake):
    proc = _run(fake, AUTORESEARCH_TG="off")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["METRIC pp512=55.250", "DIGEST pp512=00112233445566ff"]
    assert _argv(fake)[4] == "0"


@pytest.mark.parametrize("env, message", [
    ({"AUTORESEARCH_TG": "maybe"}, "AUTORESEARCH_TG must be on or off"),
    ({"AUTORESEARCH_FA": "yes"}, "AUTORESEARCH_FA must be on, off or auto"),
    ({"AUTORESEARCH_SEED": "7; rm -rf /"}, "AUTORESEARCH_SEED must be a number"),
    ({"AUTORESEARCH_THREADS": "0"}, "AUTORESEARCH_THREADS must be a positive number"),
    ({"FAKE_MODE": "fail"}, "llama-digest --bench failed"),
    ({"FAKE_MODE": "no-digest"}, "1 METRIC and 0 DIGEST lines for pp512"),
    ({"FAKE_MODE": "twice"}, "2 METRIC and 1 DIGEST lines for pp512"),
    ({"FAKE_MODE": "no-tg"}, "0 METRIC and 0 DIGEST lines for tg128"),
    ({"FAKE_MODE": "zero"}, "pp512 rate is 0.000"),
])
def test_bad_input_says_what_is_wrong_and_prints_no_sample(fake, env, message):
    proc = _run(fake, **env)
    assert proc.returncode != 0 and message in proc.stderr, (proc.stdout, proc.stderr)
    assert "METRIC" not in proc.stdout


def test_a_build_without_llama_digest_is_named(fake):
    fake[0].unlink()
    proc = _run(fake)
    assert proc.returncode == 3 and "llama-digest not found" in proc.stderr and "digest.sh build" in proc.stderr


def test_a_missing_model_is_named(fake):
    proc = _run(fake, AUTORESEARCH_MODEL="/nonexistent/model.gguf")
    assert proc.returncode == 3 and "model /nonexistent/model.gguf not found" in proc.stderr
