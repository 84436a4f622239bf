"""The best kept result among a run's records, and a summary's verdict in one line. Pure: typed
records (or a `RunSummary`) in, plain values out.

The status comment, the Action's outputs, the dashboard and the CLI's tables all ask the same
question of a record: "what did it measure on this metric?". A typed record answers it
(`ExperimentRecord.metric`).
"""
from __future__ import annotations

from collections.abc import Iterable

from jobs.contract.model import ExperimentRecord, MetricResult
from jobs.contract.runsummary import RunStopped, RunSummary

# The pipeline's phases (state.json) in which a run is over. (The bot's run states are bot.approval's.)
FINAL_PHASES = frozenset({"done", "cancelled", "failed"})


def best_kept(records: Iterable[ExperimentRecord], primary: str) -> tuple[ExperimentRecord, MetricResult] | None:
    """The kept experiment with the largest change of the primary metric, with that result (one
    whose change was not measured, None, is passed over; the first of equal changes wins)."""
    best = None
    for rec in records:
        m = rec.metric(primary)
        if rec.kind == "experiment" and rec.status == "keep" and m and m.delta_pct is not None and \
                (best is None or abs(m.delta_pct) > abs(best[1].delta_pct)):
            best = (rec, m)
    return best


def verdict_line(summary: RunSummary | RunStopped) -> str:
    """One line: what was kept, and the stack's primary-metric change per platform."""
    if isinstance(summary, RunStopped):
        return f"nothing to try: {summary.why}"
    primary = summary.primary
    exps = [e for e in summary.experiments if e.kind == "experiment"]
    kept = sorted({e.hypothesis for e in exps if e.status == "keep"})
    parts = [f"kept {len(kept)} of {len({e.hypothesis for e in exps})} experiment(s)"
             + (f" ({', '.join(kept)})" if kept else "")]
    for platform, stack in sorted(summary.stacks.items()):
        m = stack.metric(primary)
        delta = f", {primary} {m.delta_pct:+.1f}% (p={m.p_value:.3g})" if m and m.delta_pct is not None else ""
        parts.append(f"stack on {platform}: {stack.status}{delta}")
    return "; ".join(parts)
