"""The README's first command, end to end: the bundled demo keeps a real fusion, rejects the decoy."""
from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT


def test_demo_end_to_end(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "demo", "--workdir", str(tmp_path / "w"),
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    by_name = {e["name"]: e for e in summary["experiments"]}
    # At least one real fusion wins significantly, on numbers measured in this run.
    kept = [e for e in summary["experiments"] if e["status"] == "keep"]
    assert any(e["hypothesis_kind"] == "fusion" for e in kept), {n: e["reason"] for n, e in by_name.items()}
    for e in kept:
        primary = next(m for m in e["metrics"] if m["name"] == summary["primary"])
        assert primary["p_value"] < 0.05 and primary["delta_pct"] > 0 and primary["n_base"] >= 6
    # The decoy micro-optimization is measured and rejected.
    decoys = [e for e in summary["experiments"] if e["hypothesis_kind"] == "micro"]
    assert decoys and all(e["status"] != "keep" for e in decoys)
    # The stack is one commit per kept optimization on the run's branch, re-measured.
    stack = summary["stacks"]["local"]
    assert stack["metrics"] and stack["commit"]
    log = subprocess.run(["git", "-C", summary["repo"], "log", "--format=%s",
                          f"{summary['base_commit']}..{summary['branch']}"], capture_output=True, text=True).stdout
    assert len(log.splitlines()) == len(summary["stack_applied"]) >= 1
    for name in ("research.md", "experiments.jsonl", "pr.md", "summary.json"):
        assert (out / name).stat().st_size > 0
    assert "pr.md" in proc.stdout and summary["branch"] in proc.stdout
