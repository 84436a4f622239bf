"""The README's first command, end to end (pairs capped for CI time): every hypothesis gets a
status with a reason, the decoy is never kept, the branch holds exactly the stack that survived.

Whether a fusion is kept depends on this machine's noise today, so it is not asserted here; the
keep rate is measured by tests/benchmarks/verdict_power.py (METRIC lines).
"""
from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT


def test_demo_end_to_end(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "demo", "--workdir", str(tmp_path / "w"),
                           "--out", str(out), "--repeats", "16"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["experiments"] and summary["sandboxed"] is True
    for e in summary["experiments"]:
        assert e["status"] in ("keep", "discard", "skipped") and e["reason"], e
        if e["status"] != "skipped":
            primary = next(m for m in e["metrics"] if m["name"] == summary["primary"])
            assert primary["n_pairs"] >= 3 and (e["runner"]["pairs"] or 0) <= 16
        if e["status"] == "keep":
            assert primary["ci_low_pct"] > 1.0 and primary["delta_pct"] > 0
    # The decoy micro-optimization is measured and not kept.
    decoys = [e for e in summary["experiments"] if e["hypothesis_kind"] == "micro"]
    assert decoys and all(e["status"] != "keep" for e in decoys)
    # The branch carries one commit per surviving optimization, and only if the stack was confirmed.
    log = subprocess.run(["git", "-C", summary["repo"], "log", "--format=%s",
                          f"{summary['base_commit']}..{summary['branch']}"], capture_output=True, text=True).stdout
    expected = len(summary["stack_applied"]) if summary["stack_confirmed"] else 0
    assert len(log.splitlines()) == expected
    for name in ("research.md", "experiments.jsonl", "pr.md", "summary.json"):
        assert (out / name).stat().st_size > 0
    assert "pr.md" in proc.stdout and summary["branch"] in proc.stdout
