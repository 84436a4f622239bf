"""What the dashboard shows of a run, and its chart's geometry. Pure: typed data in, plain data out.

`run_view` takes a run folder's contents (as `jobs.api.read_run` returns them: the state a
`RunState`, the ledger's records `ExperimentRecord`s) and, in the App, the run's record; it keeps
only the fields the page renders: no logs, no paths, no environment.
"""
from __future__ import annotations

import math
from typing import Any, Protocol

from jobs.contract.results import FINAL_PHASES
from jobs.contract.runsummary import ExperimentRecord, Hypothesis, MetricCalibration, RunSummary

from ..approval import FINAL
from ..record import RunRecord


class RunProgress(Protocol):
    """What the page reads of a run's state.json. `jobs.contract.runstate.RunState` is one; it is not
    imported here, since that module writes the file and this one stays pure."""
    phase: str | None
    platforms: list[str]
    calibration: dict[str, dict[str, MetricCalibration]]     # platform -> metric -> its A/A calibration
    hypotheses: list[Hypothesis] | None                      # None: research has not finished
    cost_usd: float
    base_commit: str
    branch: str
    agent: str


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _cell(rec: ExperimentRecord | None, primary: str | None) -> dict:
    if rec is None:
        return {"status": "pending", "reason": "", "delta_pct": None}
    m = rec.metric(primary)
    return {"status": rec.status or "?", "reason": str(rec.reason)[:300],
            "delta_pct": _num(m and m.delta_pct), "ci_low_pct": _num(m and m.ci_low_pct),
            "ci_high_pct": _num(m and m.ci_high_pct), "p_value": _num(m and m.p_value),
            "base_mean": _num(m and m.base_mean), "head_mean": _num(m and m.head_mean),
            "n": (m.n_base, m.n_head) if m else (None, None), "seconds": _num(rec.seconds),
            "cost_usd": _num(rec.cost_usd)}


def run_view(repo: str, run_id: str, state: RunProgress, records: list[ExperimentRecord],
             summary: RunSummary | None = None, record: RunRecord | None = None, parallel: int = 1,
             primary: str | None = None) -> dict:
    """Everything the page shows, as plain data (and nothing else: no logs, no paths)."""
    platforms = list(state.platforms or (summary.platforms if summary else None) or ["local"])
    calibration = state.calibration
    primary = (summary.primary if summary else None) or primary or next(
        (name for cal in calibration.values() for name in cal), None)
    exps = [r for r in records if r.kind == "experiment"]
    by_key = {(r.name, r.platform): r for r in exps}
    hypotheses = [h for h in state.hypotheses or [] if h.id]     # one without an id has no row to fill
    names = [h.id for h in hypotheses]
    titles = {h.id: h.title for h in hypotheses}
    names += [r.name for r in exps if r.name not in names]
    experiments = [{"name": n, "title": titles.get(n, ""),
                    "cells": {p: _cell(by_key.get((n, p)), primary) for p in platforms}} for n in names]
    for e in experiments:
        e["done"] = "pending" not in {c["status"] for c in e["cells"].values()}
    stacks = {r.platform: _cell(r, primary) for r in records if r.kind == "stack"}
    waves = []
    for i in range(0, len(experiments), max(1, parallel)):
        chunk = experiments[i:i + max(1, parallel)]
        waves.append({"n": len(waves) + 1, "experiments": [e["name"] for e in chunk],
                      "status": "done" if all(e["done"] for e in chunk) else "pending"})
    phase = state.phase or "—"
    for w in waves:                     # the first unfinished wave is the one running
        if w["status"] == "pending":
            if phase == "experiments":
                w["status"] = "running"
            break
    run_state = (record.state if record else "") or ("done" if phase == "done" else phase)
    cost = _num(state.cost_usd) or 0.0
    cal = {p: {"floor_pct": _num(c[primary].floor_pct if primary in c else None),
               "repeats": c[primary].repeats if primary in c else None} for p, c in calibration.items()}
    return {
        "repo": repo, "run_id": run_id, "phase": phase, "state": run_state,
        "final": phase in FINAL_PHASES or run_state in FINAL,
        "base_commit": str(state.base_commit)[:12], "branch": state.branch,
        "agent": state.agent, "platforms": platforms, "primary": primary or "",
        "cost_usd": round(cost, 2), "calibration": cal, "experiments": experiments, "stacks": stacks,
        "waves": waves, "parallel": parallel,
        "done": sum(1 for e in experiments if e["done"]), "total": len(experiments),
        "pr_url": record.pr_url if record else "", "requester": record.requester if record else "",
        "message": (record.message if record else "")[:500],
    }


def chart(view: dict) -> dict:
    """Bars of the primary metric's change vs baseline (0 %) per experiment and platform, with CIs."""
    rows = []
    for e in view["experiments"]:
        for p, c in e["cells"].items():
            if c.get("delta_pct") is not None:
                rows.append({"label": e["name"] if len(view["platforms"]) == 1 else f"{e['name']} @ {p}",
                             "delta": c["delta_pct"], "lo": c.get("ci_low_pct"), "hi": c.get("ci_high_pct"),
                             "status": c["status"]})
    for p, c in view["stacks"].items():
        if c.get("delta_pct") is not None:
            rows.append({"label": f"stack @ {p}", "delta": c["delta_pct"], "lo": c.get("ci_low_pct"),
                         "hi": c.get("ci_high_pct"), "status": c["status"]})
    values = [abs(v) for r in rows for v in (r["delta"], r["lo"], r["hi"]) if v is not None]
    span = max([5.0] + values) * 1.15
    width, left, right, row_h, top = 640, 190, 20, 26, 24
    plot = width - left - right

    def x(v: float) -> float:
        return left + plot / 2 + (v / span) * (plot / 2)
    bars = []
    for i, r in enumerate(rows):
        y = top + i * row_h
        x0, x1 = sorted((x(0), x(r["delta"])))
        bars.append({**r, "y": y, "x": round(x0, 1), "w": round(max(1.0, x1 - x0), 1),
                     "ci": (round(x(r["lo"]), 1), round(x(r["hi"]), 1)) if r["lo"] is not None and r["hi"] is not None else None,
                     "tx": round(x(r["delta"]) + (6 if r["delta"] >= 0 else -6), 1),
                     "anchor": "start" if r["delta"] >= 0 else "end"})
    ticks = [round(span * f, 1) for f in (-1, -0.5, 0, 0.5, 1)]
    return {"bars": bars, "width": width, "height": top + len(rows) * row_h + 30, "left": left,
            "zero": round(x(0), 1), "ticks": [{"v": t, "x": round(x(t * 0.999), 1)} for t in ticks],
            "axis_y": top + len(rows) * row_h + 4, "primary": view["primary"]}
