"""examples/llama.cpp/bench.sh: one llama-bench process -> METRIC lines, picked by test shape,
then llama-digest's DIGEST line.

A stand-in llama-bench (a shell script printing llama-bench's JSON for the -p/-n it is given,
rows in either order) checks that the parser selects pp512 and tg128 by n_prompt/n_gen, that
AUTORESEARCH_TG=off runs the prompt only (-n 0) and prints no tg128 line, and that bad input
(an unknown switch value, a missing test, non-JSON) exits non-zero saying what is wrong. A
stand-in llama-digest beside it records its arguments (the pair's seed, the benchmark's threads
and flash-attention setting); the real one runs in `SIM=1 matrix.sh run` (examples/llama.cpp/README.md).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "examples" / "llama.cpp" / "bench.sh"

FAKE = r"""#!/usr/bin/env bash
# arguments as llama-bench gets them: -m M -p 512 -n N -r 1 -o json -t T -fa F
echo "$@" > "$(dirname "$0")/argv"
n=0; while [ $# -gt 0 ]; do [ "$1" = -n ] && n="$2"; shift; done
case "${FAKE_MODE:-ok}" in
  garbage) echo "not json"; exit 0 ;;
  no-pp) echo '[{"n_prompt": 0, "n_gen": 128, "avg_ts": 40.5}]'; exit 0 ;;
esac
if [ "$n" = 0 ]; then
  echo '[{"n_prompt": 512, "n_gen": 0, "avg_ts": 55.25}]'
else
  echo '[{"n_prompt": 0, "n_gen": 128, "avg_ts": 40.5}, {"n_prompt": 512, "n_gen": 0, "avg_ts": 55.25}]'
fi
"""


DIGEST = r"""#!/usr/bin/env bash
echo "$@" > "$(dirname "$0")/digest-argv"
case "${FAKE_DIGEST:-ok}" in
  fail) echo "llama-digest: logit 3 of position 0 is not finite (nan)" >&2; exit 1 ;;
  none) echo "hello" ;;
  *) echo "DIGEST logits=00112233445566ff" ;;
esac
"""


@pytest.fixture()
def fake(tmp_path):
    exe = tmp_path / "llama-bench"
    exe.write_text(FAKE)
    exe.chmod(0o755)
    digest = tmp_path / "llama-digest"
    digest.write_text(DIGEST)
    digest.chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    return exe, model


def _run(fake, **env):
    exe, model = fake
    full = {**os.environ, "AUTORESEARCH_LLAMA_BENCH": str(exe), "AUTORESEARCH_MODEL": str(model), **env}
    return subprocess.run(["bash", str(BENCH)], capture_output=True, text=True, timeout=60, env=full)


def test_both_metrics_by_test_shape_not_position(fake):
    proc = _run(fake)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["METRIC pp512=55.250", "METRIC tg128=40.500", "DIGEST logits=00112233445566ff"]
    assert " -n 128 " in (fake[0].parent / "argv").read_text()


def test_the_digest_runs_on_the_pairs_seed_with_the_benchmarks_threads_and_attention(fake):
    proc = _run(fake, AUTORESEARCH_SEED="4242", AUTORESEARCH_THREADS="2", AUTORESEARCH_FA="off")
    assert proc.returncode == 0, proc.stderr
    assert (fake[0].parent / "digest-argv").read_text().split() == [str(fake[1]), "4242", "64", "4", "2", "0"]
    assert _run(fake).returncode == 0 and (fake[0].parent / "digest-argv").read_text().split()[1:] == \
        ["1", "64", "4", "1", "-1"]                          # by hand: seed 1, one thread, auto


def test_generation_off_runs_the_prompt_only(fake):
    proc = _run(fake, AUTORESEARCH_TG="off")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["METRIC pp512=55.250", "DIGEST logits=00112233445566ff"]
    assert " -n 0 " in (fake[0].parent / "argv").read_text()


@pytest.mark.parametrize("env, message", [
    ({"AUTORESEARCH_TG": "maybe"}, "AUTORESEARCH_TG must be on or off"),
    ({"FAKE_MODE": "no-pp"}, "lacks pp512"),
    ({"FAKE_MODE": "garbage"}, "not JSON"),
    ({"AUTORESEARCH_SEED": "7; rm -rf /"}, "AUTORESEARCH_SEED must be a number"),
    ({"FAKE_DIGEST": "fail"}, "llama-digest failed"),
    ({"FAKE_DIGEST": "none"}, "printed no DIGEST line"),
])
def test_bad_input_says_what_is_wrong(fake, env, message):
    proc = _run(fake, **env)
    assert proc.returncode != 0 and message in proc.stderr, (proc.stdout, proc.stderr)


def test_a_build_without_llama_digest_is_named(fake):
    (fake[0].parent / "llama-digest").unlink()
    proc = _run(fake)
    assert proc.returncode == 3 and "llama-digest not found" in proc.stderr and "digest.sh build" in proc.stderr
