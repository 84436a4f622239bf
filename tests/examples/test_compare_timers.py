"""examples/llama.cpp/compare_timers.py: llama-bench and llama-digest --bench interleaved. Stand-in
binaries (shell scripts) print each program's real output format; the real comparison is in the
example README ("The timed process is the checked one")."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "llama.cpp" / "compare_timers.py"

BENCH = """#!/usr/bin/env bash
echo bench >> "$(dirname "$0")/order"
echo '[{"n_prompt": 0, "n_gen": 128, "avg_ts": 50.0}, {"n_prompt": 512, "n_gen": 0, "avg_ts": 200.0}]'
"""
DIGEST = """#!/usr/bin/env bash
echo digest >> "$(dirname "$0")/order"
[ -n "${BROKEN:-}" ] && { echo "METRIC pp512=1"; exit 0; }
echo "METRIC pp512=210.0"; echo "DIGEST pp512=00ff00ff00ff00ff"; echo "METRIC tg128=45.0"
"""


def _setup(tmp_path):
    for name, text in (("llama-bench", BENCH), ("llama-digest", DIGEST)):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    (tmp_path / "m.gguf").write_bytes(b"GGUF")


def _run(tmp_path, *extra, **env):
    import os
    return subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), str(tmp_path / "m.gguf"), *extra],
                          capture_output=True, text=True, timeout=60, env={**os.environ, **env})


def test_interleaves_the_two_programs_and_prints_their_ratio(tmp_path):
    _setup(tmp_path)
    done = _run(tmp_path, "--rounds", "2", "--threads", "2")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "order").read_text().split() == ["bench", "digest", "digest", "bench"]
    assert "METRIC pp512_t2_ratio=1.0500" in done.stdout and "METRIC tg128_t2_ratio=0.9000" in done.stdout


def test_a_missing_test_or_binary_is_named(tmp_path):
    _setup(tmp_path)
    done = _run(tmp_path, "--rounds", "1", "--threads", "1", BROKEN="1")
    assert done.returncode == 1 and "printed no METRIC tg128" in done.stderr
    (tmp_path / "llama-bench").unlink()
    done = _run(tmp_path)
    assert done.returncode == 2 and "llama-bench not found" in done.stderr
