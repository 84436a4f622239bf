"""Render research.md and pr.md from plain run data. Pure: dicts in, Markdown out.

Numbers only ever come from the run's own records; a platform that was configured but not
measured says so instead of showing a table.
"""
from __future__ import annotations

from typing import Any

from .model import Hypothesis

STATUS_WORDS = {
    "keep": "kept", "discard": "discarded", "noise": "too noisy to judge", "build_failed": "did not build",
    "crash": "benchmark crashed", "checks_failed": "failed correctness checks", "timeout": "timed out",
    "skipped": "not attempted",
}


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.4g}"


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def render_research(target: str, base_commit: str, hypotheses: list[Hypothesis], notes: list[str],
                    findings: list[str], agent: str) -> str:
    out = [f"# Research: {target} @ {base_commit[:12]}", "",
           f"Researcher: {agent}. Hypotheses are ranked: fusions that remove whole memory passes "
           "first (the lever when code is memory-bound), parallelism next, micro-tuning last "
           "(usually noise: compilers already do it).", "", "## Ranked hypotheses", ""]
    for rank, h in enumerate(hypotheses, start=1):
        out.append(f"### {rank}. {h.title} (`{h.id}`, {h.kind}, score {h.score:.2f})")
        out.append("")
        if h.ops:
            out.append(f"Ops: {' + '.join(h.ops)}")
        out.append(f"Why: {h.rationale}")
        if h.expected:
            out.append(f"Expected: {h.expected}")
        out.append("Evidence:")
        out += [f"- `{e.where}` {e.note}" for e in h.evidence]
        out.append("Implementation: " + (f"recipe `{h.recipe}`" if h.recipe else
                                        "maintainer patch" if h.patch else "none available offline"))
        out.append("")
    if notes:
        out += ["## Already present or not applicable", ""] + [f"- {n}" for n in notes] + [""]
    if findings:
        out += ["## All memory-pass findings", ""] + [f"- {f}" for f in findings] + [""]
    return "\n".join(out)


def ab_table(metrics: list[dict[str, Any]]) -> list[str]:
    rows = ["| metric | base mean ± sd | head mean ± sd | Δ% | 95% CI | p | verdict |",
            "|---|---|---|---|---|---|---|"]
    for m in metrics:
        rows.append(
            f"| {m['name']} | {_fmt(m['base_mean'])} ± {_fmt(m['base_sd'])} (n={m['n_base']}) "
            f"| {_fmt(m['head_mean'])} ± {_fmt(m['head_sd'])} (n={m['n_head']}) "
            f"| {m['delta_pct']:+.1f}% | {m['ci_low_pct']:+.1f}…{m['ci_high_pct']:+.1f}% | {_p(m['p_value'])} "
            f"| {m['verdict']} |")
    return rows


def _primary(exp: dict[str, Any], primary: str) -> dict[str, Any] | None:
    return next((m for m in exp.get("metrics", []) if m["name"] == primary), None)


def render_pr(summary: dict[str, Any]) -> str:
    primary = summary["primary"]
    experiments = summary["experiments"]
    kept = [e for e in experiments if e["status"] == "keep"]
    stack = summary.get("stack") or {}
    out = [f"# autoresearch: CPU optimizations for {summary['target']}", ""]
    stack_primary = _primary(stack, primary) if stack else None
    if stack_primary and stack.get("status") == "keep":
        headline = (f"{len(kept)} optimization(s) kept; together they change **{primary} by "
                    f"{stack_primary['delta_pct']:+.1f}%** (p={_p(stack_primary['p_value'])}) on {summary['cpu']}.")
    elif stack:
        headline = f"{len(kept)} optimization(s) kept individually; the stack: {stack.get('reason', '')}."
    else:
        headline = "No optimization beat the baseline by more than this machine's noise; no stack was built."
    out += ["## Summary", "", headline, "",
            f"Run `{summary['run_id']}`, base `{summary['base_commit'][:12]}`, branch `{summary['branch']}`, "
            f"{len(experiments)} experiment(s), agent: {summary['agent']}.", ""]

    for platform in summary["platforms"]:
        out += [f"## A/B on {platform}", ""]
        measured = stack if stack.get("platform") == platform and stack.get("metrics") else None
        if not measured:
            out += [f"Not measured in this run (no {platform} machine was used); no numbers are shown.", ""]
            continue
        out += [f"Baseline `{summary['base_commit'][:12]}` vs stack `{(stack.get('commit') or '')[:12]}` on "
                f"{stack.get('cpu') or summary['cpu']}; one sample = one whole benchmark process, "
                "interleaved A B B A …", ""]
        out += ab_table(measured["metrics"]) + [""]

    cal = summary.get("calibration") or {}
    if cal:
        out += ["## This machine's noise (A/A calibration)", "",
                "| metric | sd of log (per process) | drift | false-win rate | MDE | effect floor | repeats |",
                "|---|---|---|---|---|---|---|"]
        for name, c in cal.items():
            probe = (f" ({c['mde_pct_with_probe']:.1f}% with probe)" if c.get("mde_pct_with_probe") else "")
            out.append(f"| {name} | {100 * c['sd_log']:.1f}% | {'yes' if c['drift'] else 'no'} | "
                       f"{100 * c['false_win_rate']:.1f}% | {c['mde_pct']:.1f}%{probe} | {c['floor_pct']:.1f}% | "
                       f"{c['repeats']} |")
        out += ["", "Changes smaller than the MDE are reported as \"no detectable difference\", never as wins.", ""]

    out += ["## Per optimization", "", f"| experiment | kind | status | {primary} Δ% | p | why |", "|---|---|---|---|---|---|"]
    for e in experiments:
        m = _primary(e, primary)
        delta = f"{m['delta_pct']:+.1f}%" if m else "—"
        p = _p(m["p_value"]) if m else "—"
        out.append(f"| {e['name']} | {e.get('hypothesis_kind', '')} | {STATUS_WORDS.get(e['status'], e['status'])} "
                   f"| {delta} | {p} | {e['reason']} |")
    out.append("")
    for e in kept:
        out += [f"<details><summary>{e['name']}: all metrics</summary>", ""] + ab_table(e["metrics"]) + ["", "</details>", ""]

    failed = [e for e in experiments if e["status"] != "keep"]
    out += ["## What did not work, and why", ""]
    out += [f"- **{e['name']}** ({STATUS_WORDS.get(e['status'], e['status'])}): {e['reason']}" for e in failed] or ["- Everything tried was kept."]
    out += ["", "## Cost", "", f"{summary.get('cost_usd', 0.0):.2f} USD of machine time "
            f"({summary.get('wall_seconds', 0):.0f} s wall).", "",
            "## Reproduce", "", "```", *summary.get("reproduce", []), "```", "",
            "_This pull request was generated by autoresearch (an AI-assisted tool); every number above "
            "was measured in this run._", ""]
    return "\n".join(out)
