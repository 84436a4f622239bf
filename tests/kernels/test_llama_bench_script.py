"""examples/llama.cpp/bench.sh: one llama-bench process -> METRIC lines, picked by test shape.

A stand-in llama-bench (a shell script printing llama-bench's JSON for the -p/-n it is given,
rows in either order) checks that the parser selects pp512 and tg128 by n_prompt/n_gen, that
AUTORESEARCH_TG=off runs the prompt only (-n 0) and prints no tg128 line, and that bad input
(an unknown switch value, a missing test, non-JSON) exits non-zero saying what is wrong.
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


@pytest.fixture()
def fake(tmp_path):
    exe = tmp_path / "llama-bench"
    exe.write_text(FAKE)
    exe.chmod(0o755)
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
    assert proc.stdout.splitlines() == ["METRIC pp512=55.250", "METRIC tg128=40.500"]
    assert " -n 128 " in (fake[0].parent / "argv").read_text()


def test_generation_off_runs_the_prompt_only(fake):
    proc = _run(fake, AUTORESEARCH_TG="off")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["METRIC pp512=55.250"]
    assert " -n 0 " in (fake[0].parent / "argv").read_text()


@pytest.mark.parametrize("env, message", [
    ({"AUTORESEARCH_TG": "maybe"}, "AUTORESEARCH_TG must be on or off"),
    ({"FAKE_MODE": "no-pp"}, "lacks pp512"),
    ({"FAKE_MODE": "garbage"}, "not JSON"),
])
def test_bad_input_says_what_is_wrong(fake, env, message):
    proc = _run(fake, **env)
    assert proc.returncode != 0 and message in proc.stderr, (proc.stdout, proc.stderr)
