"""Render research.md and pr.md from plain run data. Pure: dicts in, Markdown out.

Numbers only ever come from the run's own records; a platform that was configured but not
measured says so instead of showing a table.
"""
from __future__ import annotations

from typing import Any

from .model import Hypothesis
from .machine import one_line
from .report_review import (HEAD_PATCH, commits_section, failures_section, fenced, interval, noise_section, paired_table,
                            rule_sentence, untrusted, untrusted_code, untrusted_html)
from .results import metric
from .runsummary import RunSummary

STATUS_WORDS = {
    "keep": "kept", "discard": "discarded", "noise": "too noisy to judge", "build_failed": "did not build",
    "crash": "benchmark crashed", "checks_failed": "failed correctness checks", "timeout": "timed out",
    "skipped": "not attempted", "invalid": "numbers not trusted (integrity check)",
}


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.4g}"


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def _p_eq(p: float | None) -> str:
    """`p<0.001` or `p=0.012`: the comparison sign belongs to the value."""
    text = _p(p)
    return f"p{text}" if text.startswith("<") else f"p={text}"


def _p(p: float | None) -> str:
    if p is None:
        return "—"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _pct(value: float | None) -> str:
    """A signed percentage; None stands for a bound that could not be estimated."""
    return "?" if value is None else f"{value:+.1f}%"


PROFILE_EVIDENCE = "profile:"      # evidence rows jobs.research.offline.apply_profile adds


def amdahl_lines(h: Hypothesis) -> list[str]:
    """'Amdahl bound: …' from the op profile's evidence rows of a hypothesis (none without a profile)."""
    rows = [e for e in h.evidence if e.where.startswith(PROFILE_EVIDENCE)]
    if not rows:
        return []
    return ["Amdahl bound (op profile): " + "; ".join(
        f"{untrusted(e.where[len(PROFILE_EVIDENCE):])}: {untrusted(e.note)}" for e in rows)]


def profile_section(profile: dict[str, Any] | None, top: int = 8) -> list[str]:
    """pr.md's view of the op profile (jobs.research.profile.Profile.to_dict()): where each
    workload's time went, so a reader can set each kept change against its Amdahl bound."""
    if not profile or not profile.get("workloads"):
        return []
    out = ["## Where the time goes (op profile of the base commit)", ""]
    if profile.get("command"):
        out += [f"One process of {untrusted_code(profile['command'])}"
                + (f" on {untrusted(profile['cpu'])}" if profile.get("cpu") else "")
                + "; share of graph-evaluation time per op:", ""]
    for w in profile["workloads"]:
        ops = ", ".join(f"{untrusted(op)} {100 * share:.1f}%" for op, share in list(w["by_op"].items())[:top])
        out.append(f"- **{untrusted(w['name'])}** ({_plural(w['graphs'], 'graph')} of {_plural(w['tokens'], 'token')}, "
                   f"{w['total_ms']:.1f} ms, {_plural(w['threads'], 'thread')}): {ops}")
    out.append("")
    return out


def with_warning(markdown: str, warning: str) -> str:
    """`markdown` with a warning block under its title (e.g. a profile that was not measured)."""
    if not warning:
        return markdown
    title, _, rest = markdown.partition("\n")
    return f"{title}\n\n> **Warning:** {untrusted(warning)}\n{rest}"


def render_research(target: str, base_commit: str, hypotheses: list[Hypothesis], notes: list[str],
                    findings: list[str], agent: str) -> str:
    out = [f"# Research: {target} @ {base_commit[:12]}", "",
           f"Researcher: {agent}. Hypotheses are ranked: fusions that remove whole memory passes "
           "first (the lever when code is memory-bound), parallelism next, micro-tuning last "
           "(usually noise: compilers already do it).", "", "## Ranked hypotheses", ""]
    for rank, h in enumerate(hypotheses, start=1):
        out.append(f"### {rank}. {untrusted(h.title)} ({untrusted_code(h.id)}, {untrusted(h.kind)}, score {h.score:.2f})")
        out.append("")
        if h.ops:
            out.append(f"Ops: {untrusted(' + '.join(h.ops))}")
        out.append(f"Why: {untrusted(h.rationale)}")
        if h.expected:
            out.append(f"Expected: {untrusted(h.expected)}")
        out += amdahl_lines(h)
        out.append("Evidence:")
        out += [f"- {untrusted_code(e.where)} {untrusted(e.note)}" for e in h.evidence if not e.where.startswith(PROFILE_EVIDENCE)]
        out.append("Implementation: " + (f"recipe `{h.recipe}`" if h.recipe else
                                        "maintainer patch" if h.patch else "none available offline"))
        out.append("")
    if notes:
        out += ["## Already present or not applicable", ""] + [f"- {untrusted(n)}" for n in notes] + [""]
    if findings:
        out += ["## All memory-pass findings", ""] + [f"- {untrusted(f)}" for f in findings] + [""]
    return "\n".join(out)


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g} s"


def runner_table(experiments: list[dict[str, Any]]) -> list[str]:
    """The runner's own clocks per experiment: what the integrity check compared the claims with."""
    rows = ["| experiment | platform | pairs | stopped | wall base → head | CPU (whole tree) base → head |",
            "|---|---|---|---|---|---|"]
    for e in experiments:
        r = e.get("runner") or {}
        if not r.get("pairs"):
            continue
        rows.append(f"| {untrusted(e['name'])} | {untrusted(e['platform'])} | {r['pairs']} | {untrusted(r.get('stopped') or '—')} | "
                    f"{_seconds(r.get('wall_base_s'))} → {_seconds(r.get('wall_head_s'))} | "
                    f"{_seconds(r.get('cpu_base_s'))} → {_seconds(r.get('cpu_head_s'))} |")
    return rows if len(rows) > 2 else []


def _primary(exp: dict[str, Any], primary: str) -> dict[str, Any] | None:
    return metric(exp, primary)


def floor_of(summary: RunSummary, platform: str) -> float | None:
    """The floor the platform's verdicts were judged at (the calibration may have raised it)."""
    floors = summary.floor_pct or {}
    if platform in floors:
        return floors[platform]
    cal = (summary.calibration or {}).get(platform, {}).get(summary.primary) or {}
    return cal.get("floor_pct")


def _headline(summary: RunSummary) -> str:
    primary = summary.primary
    kept = summary.stack_applied
    parts = []
    for platform, stack in summary.stacks.items():
        m = _primary(stack, primary)
        if m and stack["status"] == "keep":
            level = f" at level {m['alpha']:.2g}" if m.get("alpha") else ""
            floor = floor_of(summary, platform)
            parts.append(f"**{primary} {m['delta_pct']:+.1f}%** on {untrusted(platform)} (paired estimate over "
                         f"{m.get('n_pairs') or m.get('n_base', '?')} pairs; one-sided interval {_pct(m['ci_low_pct'])}…"
                         f"{_pct(m['ci_high_pct'])}{level}, whose lower end clears the "
                         f"{f'{floor:g}% ' if floor is not None else ''}floor)")
        else:
            parts.append(f"on {untrusted(platform)} the stack was {STATUS_WORDS.get(stack['status'], stack['status'])}: "
                         f"{untrusted(stack['reason'])}")
    alone = sorted({e["hypothesis"] for e in summary.experiments if e["status"] == "keep"})
    no_branch = (" No branch was left" + (f" ({summary.branch_note})" if summary.branch_note else "")
                 + "." if summary.branch_left is False else " The branch equals the base commit.")
    if not alone:
        return "No optimization beat the baseline by more than this machine's noise; no stack was built." + no_branch
    if not kept:
        return (f"{_plural(len(alone), 'optimization')} {'was' if len(alone) == 1 else 'were'} kept alone ({untrusted(', '.join(alone))}), but none kept its place in "
                "the stack (see the leave-one-out table below)." + no_branch)
    line = f"{_plural(len(kept), 'optimization')} kept ({untrusted(', '.join(kept))}); together: " + "; ".join(parts) + "."
    if stacks := summary.stacks:
        if not any(st["status"] == "keep" for st in stacks.values()):
            line += (" The re-measure did not confirm the stack." + no_branch + " The individual results below "
                     "are leads to re-measure, not changes to merge.")
    return line


def _calibration(summary: RunSummary) -> list[str]:
    out = []
    for platform, cal in summary.calibration.items():
        out += [f"## This machine's noise on {untrusted(platform)} (A/A calibration: two builds of the base commit)", "",
                "| metric | pairs | noise per pair | A/A Δ (two-sided p) | order effect | false keeps (simulated) | "
                "MDE at slot 1 | pairs: null / at MDE | floor | max pairs |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for name, c in cal.items():
            mde = f"{c['mde_pct']:.1f}%" if c.get("mde_pct") is not None else "—"
            out.append(f"| {name} | {c.get('n_pairs', '—')} | {100 * (c.get('sd_log') or 0):.1f}% | "
                       f"{_pct(c.get('aa_delta_pct'))} ({_p(c.get('aa_p_value'))}) | "
                       f"{_pct(c.get('order_effect_pct'))}{' (adjusted)' if c.get('drift') else ''} | "
                       f"{100 * (c.get('false_win_rate') or 0):.1f}% | {mde} | "
                       f"{_fmt(c.get('mean_pairs_null'))} / {_fmt(c.get('mean_pairs_at_mde'))} | "
                       f"{c['floor_pct']:.1f}% | {c['repeats']} |")
        out.append("")
        out += _noise_as_it_went(summary, platform)
    if out:
        ec = summary.error_control or {}
        out += ["How results are judged: baseline and candidate run as coin-ordered pairs of whole processes "
                "with the same input seed, sampled until an anytime-valid paired test decides (or the pair "
                "cap); a keep needs its interval to clear the floor. The decision is one-sided (the "
                "interval's lower end, at the level per side, against the floor); the only p-values in this "
                "report are the A/A calibration's, labelled two-sided. "
                + (f"Across the run, the experiment in slot i is kept at level {ec.get('alpha', 0.05):g} / "
                   f"(i · H_{ec.get('family', '?')}), so the chance of any false keep in this run is at most "
                   f"{ec.get('alpha', 0.05):g}. " if ec else "")
                + "Changes smaller than the MDE are reported as \"no detectable difference\", never as wins; "
                "noise flags are warnings, never vetoes.", ""]
    return out


def _noise_as_it_went(summary: RunSummary, platform: str) -> list[str]:
    """The primary metric's noise per pair in each experiment, beside the calibration's (jobs/drift.py)."""
    noise = (summary.noise or {}).get(platform) or {}
    history = noise.get("history") or []
    if not history:
        return []
    seen = "; ".join(f"{untrusted(h['name'])} {h['noise_pct']:.1f}% ({h['pairs']} pairs)" for h in history)
    return [f"Noise as the run went ({untrusted(summary.primary)}, per pair, each experiment's own pairs with its "
            f"effect taken out): {seen}. Once {8} or more such pairs exist, each later experiment's MDE is "
            f"computed from the most recent {noise.get('pool_pairs', 0)} of them instead of the calibration's.", ""]


def _how_sure(summary: RunSummary, ec: dict[str, Any]) -> str:
    text = rule_sentence(floor_of(summary, summary.platform) if summary.platform else None, ec.get("alpha"))
    if summary.simulate:      # the yardstick decided: say so before the wall clock's own rule
        text = text.replace("How sure: a change is kept when", "How sure: keeps in this run are decided on simulated "
                            "cycles (the deterministic yardstick section below), with the wall-clock pairs as a guard "
                            "against a regression; on the wall clock alone a change would be kept when", 1)
    return text


def _branch_line(summary: RunSummary, experiments: list[dict[str, Any]]) -> str:
    branch = (f"branch `{summary.branch}`" if summary.branch_left
              else "no branch" + (f" ({summary.branch_note})" if summary.branch_note else ""))
    return (f"Run `{summary.run_id}`, base `{summary.base_commit[:12]}`, {branch}, "
            f"{len({e['hypothesis'] for e in experiments})} hypotheses tested, agent: {untrusted(summary.agent)}.")


def _interval(m: dict[str, Any] | None) -> str:
    return interval(m) if m else "—"


def _decided_interval(exp: dict[str, Any], m: dict[str, Any] | None) -> str:
    """The interval the experiment was decided with: for one the yardstick decided, the wall-clock
    guard's (the keep rule's own would read "too few pairs", which decided nothing)."""
    runner = exp.get("runner") or {}
    guard = runner.get("wall_guard")
    if runner.get("simulated") and guard and guard.get("pairs"):
        from .simulate import guard_interval_at
        return f"guard {guard_interval_at(guard)}"
    return _interval(m)


def _yardstick_headline(summary: RunSummary) -> list[str]:
    from .simulate import headline
    return headline(summary)


def _where(summary: RunSummary, platform: str, stack: dict[str, Any]) -> str:
    """The machine a platform's numbers come from: CPU, ISA and its flags, kernel, compiler, load."""
    facts = (summary.machines or {}).get(platform)
    if not facts:
        return stack.get("cpu") or summary.cpus.get(platform, "")
    return one_line(facts, facts.get("load") or None)


def notes_section(summary: RunSummary) -> list[str]:
    """What the run warned about as it went (a refused request of the repository's config, a
    calibration or research caveat), each once; the messages carry repository-controlled names, so
    each is inert text (`RunSummary` already holds each once). The missing profile has the report's
    own warning at the top (`with_warning`)."""
    notes = [w for w in summary.warnings if w and w != summary.profile_missing]
    if not notes:
        return []
    return ["## Notes from the run", "", *[f"- {untrusted(w)}" for w in notes], ""]


def render_pr(summary: RunSummary) -> str:
    primary = summary.primary
    experiments = summary.experiments
    stacks = summary.stacks
    ec = summary.error_control or {}
    out = [f"# autoresearch: CPU optimizations for {untrusted(summary.target)}", "", "## Summary", "",
           *(_yardstick_headline(summary) or [_headline(summary), ""]), _branch_line(summary, experiments), "",
           _how_sure(summary, ec), ""]
    out += [f"Measured on {untrusted(p)}: {untrusted(one_line(m, m.get('load') or None))}."
            for p, m in (summary.machines or {}).items()] + ([""] if summary.machines else [])
    out += notes_section(summary)
    out += commits_section(summary)

    for platform in summary.platforms:
        out += [f"## A/B on {untrusted(platform)}", ""]
        stack = stacks.get(platform)
        if not stack or not stack.get("metrics"):
            why = ("no optimization was kept, so there is no stack to measure" if platform in summary.cpus
                   else f"no {untrusted(platform)} machine was used in this run")
            out += [f"Not measured: {why}. No numbers are shown.", ""]
            continue
        out += [f"Baseline `{summary.base_commit[:12]}` vs stack `{(stack.get('commit') or '')[:12]}` on "
                f"{untrusted(_where(summary, platform, stack))}: coin-ordered pairs of whole benchmark "
                "processes (A B or B A) after a discarded warm-up; each row is judged on its pairs.", ""]
        out += paired_table(stack["metrics"], floor_of(summary, platform)) + [""]

    out += _calibration(summary)
    out += profile_section(summary.profile)
    from .simulate import render_section
    out += render_section(summary)
    out += ["## Per optimization", "",
            f"| experiment | platform | kind | status | {primary} Δ | interval (level per side) | why |",
            "|---|---|---|---|---|---|---|"]
    for e in experiments:
        m = _primary(e, primary)
        out.append(f"| {untrusted(e['name'])} | {untrusted(e['platform'])} | {untrusted(e.get('hypothesis_kind', ''))} | "
                   f"{STATUS_WORDS.get(e['status'], e['status'])} | {_pct(m['delta_pct']) if m else '—'} | "
                   f"{_decided_interval(e, m)} | {untrusted(e['reason'])} |")
    out.append("")
    if summary.attribution:
        out += ["## Does each commit earn its place? (leave-one-out, last-ranked first)", "",
                "While two or more commits remain, the stack is measured against itself without one of "
                "them; a commit that shows no contribution of its own leaves the branch.", "",
                f"| commit | platform | status | {primary} Δ | interval (level per side) | why |",
                "|---|---|---|---|---|---|"]
        for a in summary.attribution:
            m = _primary(a, primary)
            out.append(f"| {untrusted(a['name'].removeprefix('attribution:'))} | {untrusted(a['platform'])} | "
                       f"{STATUS_WORDS.get(a['status'], a['status'])} | {_pct(m['delta_pct']) if m else '—'} | "
                       f"{_decided_interval(a, m)} | {untrusted(a['reason'])} |")
        out.append("")
    clocks = runner_table(experiments + list(stacks.values()))
    if clocks:
        out += ["## The runner's own clocks", "",
                "Measured by the runner around each sandboxed benchmark process (medians); a candidate whose "
                "claimed speed-up these clocks cannot account for is not kept.", ""] + clocks + [""]
    for e in experiments:
        if e["status"] == "keep":
            out += [f"<details><summary>{untrusted_html(e['name'])} on {untrusted_html(e['platform'])}: all metrics</summary>", ""]
            out += paired_table(e["metrics"], floor_of(summary, e["platform"])) + ["", "</details>", ""]

    failed = [e for e in experiments if e["status"] != "keep"]
    out += ["## What did not work, and why", ""]
    out += [f"- **{untrusted(name)}** won on its own but its commit conflicts with the ones stacked before it, so it "
            "is not in this branch; it needs rebasing onto the stack and a measurement of its own."
            for name in summary.stack_dropped]
    out += [f"- **{untrusted(e['name'])}** on {untrusted(e['platform'])} ({STATUS_WORDS.get(e['status'], e['status'])}): "
            f"{untrusted(e['reason'])}" for e in failed] or ["- Everything tried was kept."]
    out += [f"- **{untrusted(name)}** was kept alone but showed no contribution of its own inside the stack "
            "(leave-one-out), so it is not in this branch." for name in summary.stack_unattributed]
    out.append("")
    out += failures_section(failed)
    out += noise_section(experiments + list(stacks.values()))
    if summary.sandboxed is False:
        by = summary.unsandboxed_by or "the operator's explicit opt-out"
        out += [f"**Target code ran WITHOUT a sandbox in this run** (switched off by {by}): the numbers "
                "above carry no protection against state left between benchmark processes.", ""]
    out += ["## Cost", "", f"{summary.cost_usd:.2f} USD of machine time "
            f"({summary.wall_seconds:.0f} s wall for this invocation).", ""]
    out += _reproduce(summary)
    out += ["_Every number above was measured in this run._", ""]
    return with_warning("\n".join(out), summary.profile_missing)


def _reproduce(summary: RunSummary) -> list[str]:
    lines = summary.reproduce
    what = ("Measures base against this branch again from a fresh clone: the branch's diff is one candidate, "
            "calibrated and judged like this run's own experiments (`--repeats N` bounds the pairs, and so "
            "the time)." if any(HEAD_PATCH in line for line in lines)    # what the lines do (a bench: always)
            else "Runs the whole loop again from a fresh clone of the base commit (`--repeats N` bounds the "
                 "pairs, and so the time).")
    out = ["## Reproduce", "", what, ""] + fenced("\n".join(lines), "sh") + [""]
    if summary.resume:
        out += ["Re-print (or resume, if it stopped) this run from its folder: " + untrusted_code(summary.resume), ""]
    return out
