"""Render research.md and pr.md from a run's typed data. Pure: a `RunSummary` (its records
`ExperimentRecord`s) in, Markdown out.

Numbers only ever come from the run's own records; a platform that was configured but not
measured says so instead of showing a table. Every line is `jobs.guard.mdsafe.Markdown` made by `md`
(a repository's names escaped where they enter a template), and each document is assembled by
`mdsafe.document`, which refuses a plain string (see `jobs.report.report_review` for the helpers).
"""
from __future__ import annotations


from jobs.guard.mdsafe import Markdown, code, details, document, join, md, spans
from jobs.contract.model import ExperimentRecord, Hypothesis, MetricResult
from jobs.contract.opprofile import OpProfile
from jobs.measure.machine import one_line
from jobs.report.report_review import HEAD_PATCH, commits_section, failures_section, fenced, interval, noise_section, paired_table, rule_sentence, untrusted, untrusted_code
from jobs.guard import mdsafe
from jobs.contract.runsummary import ErrorControl, RunSummary

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


def amdahl_lines(h: Hypothesis) -> list[Markdown]:
    """'Amdahl bound: …' from the op profile's evidence rows of a hypothesis (none without a profile)."""
    rows = [e for e in h.evidence if e.where.startswith(PROFILE_EVIDENCE)]
    if not rows:
        return []
    return [md("Amdahl bound (op profile): {}", join("; ", [
        md("{}: {}", e.where[len(PROFILE_EVIDENCE):], spans(e.note, at_start=False)) for e in rows]))]


def profile_section(profile: OpProfile | None, top: int = 8) -> list[Markdown]:
    """pr.md's view of the op profile: where each workload's time went, so a reader can set each
    kept change against its Amdahl bound."""
    if not profile or not profile.workloads:
        return []
    out = [md("## Where the time goes (op profile of the base commit)"), md("")]
    if profile.command:
        out += [md("One process of {}{}; share of graph-evaluation time per op:", untrusted_code(profile.command),
                   md(" on {}", profile.cpu) if profile.cpu else md("")), md("")]
    for w in profile.workloads:
        ops = join(", ", [md("{} {:.1f}%", op, 100 * share) for op, share in list(w.by_op.items())[:top]])
        out.append(md("- **{}** ({} of {}, {:.1f} ms, {}): {}", w.name, _plural(w.graphs, "graph"),
                      _plural(w.tokens, "token"), w.total_ms, _plural(w.threads, "thread"), ops))
    out.append(md(""))
    return out


def with_warning(markdown: Markdown, warning: str) -> Markdown:
    """`markdown` with a warning block under its title (e.g. a profile that was not measured)."""
    title, *rest = mdsafe.lines(markdown)
    if not warning:
        return markdown
    return document([title, md(""), md("> **Warning:** {}", spans(warning, 2000)), *rest])


OFF_PATH_LISTED = 20     # research.md's "Not on the measured path" names this many, then counts the rest


def render_research(target: str, base_commit: str, hypotheses: list[Hypothesis], notes: list[str],
                    findings: list[Markdown], agent: str,
                    off_path: list[tuple[Hypothesis, str]] | tuple = ()) -> Markdown:
    """research.md's first part. `notes`: the research's own sentences (their backticks mark code);
    `findings`: lines already made Markdown (the memory-pass scan's, `finding_line`); `off_path`:
    the hypotheses a callgrind profile found in code the workload never ran, with why."""
    measured = any(h.measured_share is not None for h in hypotheses) or bool(off_path)
    out = [md("# Research: {} @ {}", target, base_commit[:12]), md(""),
           md("Researcher: {}. Hypotheses are ranked by measured cost: the share of the callgrind profile's simulated "
              "cycles in the code each would change, times what its kind of change can remove there (a fusion of N "
              "passes (N-1)/N, a change inside a function a quarter, a build option a few % of the whole program); "
              "changes to code holding 5% or more of the profile come before build options. The score is that "
              "product, in % of the profile.", agent) if measured else
           md("Researcher: {}. Hypotheses are ranked: fusions that remove whole memory passes first (the lever when "
              "code is memory-bound), parallelism next, micro-tuning last (usually noise: compilers already do it).",
              agent), md(""), md("## Ranked hypotheses"), md("")]
    for rank, h in enumerate(hypotheses, start=1):
        out += [md("### {}. {} ({}, {}, score {:.2f})", rank, untrusted(h.title), untrusted_code(h.id), untrusted(h.kind),
                   h.score), md("")]
        if h.ops:
            out.append(md("Ops: {}", untrusted(" + ".join(h.ops))))
        out.append(md("Why: {}", spans(h.rationale, at_start=False)))
        if h.expected:
            out.append(md("Expected: {}", spans(h.expected, at_start=False)))
        if h.measured_share is not None:
            out.append(md("Measured: {:.1f}% of the simulated cycles are in the code it changes{}.",
                          100 * h.measured_share, " (a build option: the whole program)" if h.kind == "build" else ""))
        out += amdahl_lines(h)
        out.append(md("Evidence:"))
        out += [md("- {} {}", untrusted_code(e.where), spans(e.note, at_start=False))
                for e in h.evidence if not e.where.startswith(PROFILE_EVIDENCE)]
        out.append(md("Implementation: {}", md("recipe {}", code(h.recipe)) if h.recipe else
                      md("generated patch ({})", h.generated) if h.patch and h.generated else
                      "maintainer patch" if h.patch else "none available offline"))
        out.append(md(""))
    if off_path:
        out += [md("## Not on the measured path"), md(""),
                md("The profiled workload never ran the code these would change, so a change there cannot move the "
                   "benchmark: they are not ranked and not tried."), md(""),
                *[md("- {} {}: {}", untrusted_code(h.id), untrusted(h.title), spans(why, at_start=False))
                  for h, why in off_path[:OFF_PATH_LISTED]],
                *([md("- and {} more", len(off_path) - OFF_PATH_LISTED)] if len(off_path) > OFF_PATH_LISTED else []),
                md("")]
    if notes:
        out += [md("## Already present or not applicable"), md(""), *[md("- {}", spans(n)) for n in notes], md("")]
    if findings:
        out += [md("## All memory-pass findings"), md(""), *[md("- {}", f) for f in findings], md("")]
    return document(out)


def finding_line(where: str, describe: str) -> Markdown:
    """One memory-pass finding: where it is (code) and what the scan found there."""
    return md("{} {}", code(where), spans(describe, at_start=False))


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g} s"


def runner_table(experiments: list[ExperimentRecord]) -> list[Markdown]:
    """The runner's own clocks per experiment: what the integrity check compared the claims with."""
    rows = [md("| experiment | platform | pairs | stopped | wall base → head | CPU (whole tree) base → head |"),
            md("|---|---|---|---|---|---|")]
    for e in experiments:
        r = e.runner
        if not r.pairs:
            continue
        rows.append(md("| {} | {} | {} | {} | {} → {} | {} → {} |", untrusted(e.name), untrusted(e.platform),
                       r.pairs, untrusted(r.stopped or "—"), _seconds(r.wall_base_s),
                       _seconds(r.wall_head_s), _seconds(r.cpu_base_s), _seconds(r.cpu_head_s)))
    return rows if len(rows) > 2 else []


def floor_of(summary: RunSummary, platform: str) -> float | None:
    """The floor the platform's verdicts were judged at (the calibration may have raised it)."""
    floors = summary.floor_pct or {}
    if platform in floors:
        return floors[platform]
    cal = (summary.calibration or {}).get(platform, {}).get(summary.primary)
    return cal.floor_pct if cal is not None else None


def _headline(summary: RunSummary) -> Markdown:
    primary = summary.primary
    kept = summary.stack_applied
    parts = []
    for platform, stack in summary.stacks.items():
        m = stack.metric(primary)
        if m and stack.status == "keep":
            level = f" at level {m.alpha:.2g}" if m.alpha else ""
            floor = floor_of(summary, platform)
            parts.append(md("**{} {:+.1f}%** on {} (paired estimate over {} pairs; one-sided interval {}…{}{}, whose "
                            "lower end clears the {}floor)", primary, m.delta_pct, untrusted(platform),
                            m.n_pairs or (m.n_base if m.n_base is not None else "?"), _pct(m.ci_low_pct),
                            _pct(m.ci_high_pct), level, f"{floor:g}% " if floor is not None else ""))
        else:
            parts.append(md("on {} the stack was {}: {}", untrusted(platform),
                            STATUS_WORDS.get(stack.status, stack.status), spans(stack.reason, at_start=False)))
    alone = sorted({e.hypothesis for e in summary.experiments if e.status == "keep"})
    no_branch = (md(" No branch was left{}.", md(" ({})", summary.branch_note) if summary.branch_note else md(""))
                 if summary.branch_left is False else md(" The branch equals the base commit."))
    if not alone:
        return md("No optimization beat the baseline by more than this machine's noise; no stack was built.{}", no_branch)
    if not kept and set(alone) <= set(summary.stack_kept_off or {}):
        return md("{} {} kept alone ({}), and each is kept off the branch (why: below).{}",
                  _plural(len(alone), "optimization"), "was" if len(alone) == 1 else "were", untrusted(", ".join(alone)),
                  no_branch)
    if not kept:
        return md("{} {} kept alone ({}), but none kept its place in the stack (see the leave-one-out table below).{}",
                  _plural(len(alone), "optimization"), "was" if len(alone) == 1 else "were", untrusted(", ".join(alone)),
                  no_branch)
    line = md("{} kept ({}); together: {}.", _plural(len(kept), "optimization"), untrusted(", ".join(kept)),
              join("; ", parts))
    if stacks := summary.stacks:
        if not any(st.status == "keep" for st in stacks.values()):
            line = md("{} The re-measure did not confirm the stack.{} The individual results below are leads to "
                      "re-measure, not changes to merge.", line, no_branch)
    return line


def _calibration(summary: RunSummary) -> list[Markdown]:
    out = []
    for platform, cal in summary.calibration.items():
        out += [md("## This machine's noise on {} (A/A calibration: two builds of the base commit)", untrusted(platform)),
                md(""), md("| metric | pairs | noise per pair | A/A Δ (two-sided p) | order effect | false keeps "
                           "(simulated) | MDE at slot 1 | pairs: null / at MDE | floor | max pairs |"),
                md("|---|---|---|---|---|---|---|---|---|---|")]
        for name, c in cal.items():
            mde = f"{c.mde_pct:.1f}%" if c.mde_pct is not None else "—"
            out.append(md("| {} | {} | {:.1f}% | {} ({}) | {}{} | {:.1f}% | {} | {} / {} | {:.1f}% | {} |", name,
                          "—" if c.n_pairs is None else c.n_pairs, 100 * (c.sd_log or 0), _pct(c.aa_delta_pct),
                          _p(c.aa_p_value), _pct(c.order_effect_pct), " (adjusted)" if c.drift else "",
                          100 * (c.false_win_rate or 0), mde, _fmt(c.mean_pairs_null),
                          _fmt(c.mean_pairs_at_mde), c.floor_pct, c.repeats))
        out.append(md(""))
        out += _noise_as_it_went(summary, platform)
    if out:
        ec = summary.error_control
        out += [md("How results are judged: baseline and candidate run as coin-ordered pairs of whole processes with the "
                   "same input seed, sampled until an anytime-valid paired test decides (or the pair cap); a keep needs "
                   "its interval to clear the floor. The decision is one-sided (the interval's lower end, at the level "
                   "per side, against the floor); the only p-values in this report are the A/A calibration's, labelled "
                   "two-sided. {}Changes smaller than the MDE are reported as \"no detectable difference\", never as "
                   "wins; noise flags are warnings, never vetoes.",
                   md("Across the run, the experiment in slot i is kept at level {:g} / (i · H_{}), so the chance of any "
                      "false keep in this run is at most {:g}. ", ec.alpha, "?" if ec.family is None else ec.family,
                      ec.alpha) if ec else md("")), md("")]
    return out


def _noise_as_it_went(summary: RunSummary, platform: str) -> list[Markdown]:
    """The primary metric's noise per pair in each experiment, beside the calibration's (jobs/stats/drift.py)."""
    noise = (summary.noise or {}).get(platform)
    history = noise.history if noise is not None else []
    if not history:
        return []
    seen = join("; ", [md("{} {:.1f}% ({} pairs)", untrusted(h.name), h.noise_pct, h.pairs) for h in history])
    return [md("Noise as the run went ({}, per pair, each experiment's own pairs with its effect taken out): {}. Once {} "
               "or more such pairs exist, each later experiment's MDE is computed from the most recent {} of them "
               "instead of the calibration's.", untrusted(summary.primary), seen, 8, noise.pool_pairs), md("")]


def _how_sure(summary: RunSummary, ec: ErrorControl | None) -> Markdown:
    # the yardstick decided: say so before the wall clock's own rule
    return rule_sentence(floor_of(summary, summary.platform) if summary.platform else None, ec.alpha if ec else None,
                         simulated=bool(summary.simulate))


def kept_off_lines(summary: RunSummary) -> list[Markdown]:
    """Issue 44: what was kept alone but is not on the branch by the stack's rule, each with why (a
    build not shippable by default; a build-option family's member superseded by its best)."""
    off = summary.stack_kept_off or {}
    if not off:
        return []
    return [*[md("- **{}** was kept alone but is kept off the branch: {}.", untrusted(name),
                 spans(why.rstrip("."), 2000, at_start=False)) for name, why in off.items()], md("")]


def _branch_line(summary: RunSummary, experiments: list[ExperimentRecord]) -> Markdown:
    branch = (md("branch {}", code(summary.branch)) if summary.branch_left
              else md("no branch{}", md(" ({})", summary.branch_note) if summary.branch_note else md("")))
    return md("Run {}, base {}, {}, {} hypotheses tested, agent: {}.", code(summary.run_id),
              code(summary.base_commit[:12]), branch, len({e.hypothesis for e in experiments}),
              untrusted(summary.agent))


def _decided_interval(exp: ExperimentRecord, m: MetricResult | None) -> str:
    """The interval the experiment was decided with: for one the yardstick decided, the wall-clock
    guard's (the keep rule's own would read "too few pairs", which decided nothing)."""
    guard = exp.wall_guard
    if exp.simulated and guard and guard.pairs:
        from jobs.measure.simulate import guard_interval_at
        return f"guard {guard_interval_at(guard)}"
    return interval(m)


def _yardstick_headline(summary: RunSummary) -> list[Markdown]:
    if summary.stack_kept_off and not summary.stacks:
        return []      # kept, then all kept off the branch: `_headline` says so, not "nothing beat the floor"
    from jobs.measure.simulate import headline
    return headline(summary)


def _leans_the_other_way(record: ExperimentRecord, primary: str) -> bool:
    """A keep the simulated cycles decided whose wall-clock pairs lean to a loss: the guard's one
    look (`loss_p`, the signed-rank p that the candidate is slower, oriented by the metric's
    direction) below one half, though not below its level (or the keep would have been refused)."""
    guard = record.wall_guard
    loss_p = guard.loss_p if guard else None
    if record.status != "keep" or not record.simulated or loss_p is None or loss_p >= 0.5:
        return False
    # A lean the size of the noise is not worth a sentence (a murmur3 stack kept at -11.6% simulated
    # was said to lean "the other way" at -0.4% with its interval -3.0%…+1.5% confirming it): it takes
    # a median change of LEAN_PCT or more toward a loss, or the guard's interval not excluding one.
    main = record.metric(primary)
    unconfirmed = guard.lo_pct is not None and guard.tolerance_pct is not None and \
        guard.lo_pct <= -guard.tolerance_pct
    return unconfirmed or (main is not None and abs(main.delta_pct or 0.0) >= LEAN_PCT)


LEAN_PCT = 1.0      # the wall clock's median change toward a loss that pr.md's summary names


def guard_leaning(summary: RunSummary) -> list[Markdown]:
    """Issue 43: the summary says in plain words when simulated cycles kept a change while the
    wall clock leaned the other way (within the guard's tolerance), so a reviewer reads it before
    any table. The stack's record on each platform; where no stack was kept there, the kept
    experiments'."""
    stacked = {p for p, st in summary.stacks.items() if st.status == "keep"}
    records = [(md("the stack"), st) for p, st in summary.stacks.items() if p in stacked]
    records += [(untrusted(e.name), e) for e in summary.experiments if e.platform not in stacked]
    out = []
    for what, r in records:
        if not _leans_the_other_way(r, summary.primary):
            continue
        runner, sim = r.runner, r.simulated
        g, m = r.wall_guard, r.metric(summary.primary)
        from jobs.measure.simulate import guard_interval_at
        wall = (md("{} {:+.1f}%, interval {}", summary.primary, m.delta_pct, guard_interval_at(g)) if m
                else md("interval {}", guard_interval_at(g)))
        base, head = runner.cpu_base_s, runner.cpu_head_s
        cpu = (md(", and the runner's CPU clock {:+.1f}% per process", 100 * (head / base - 1))
               if base and head and head > base else md(""))
        tol = g.tolerance_pct
        within = (md("within the {:g}% tolerance", tol) if tol is not None else md("within the guard's tolerance"))
        out += [md("**Kept on simulated cycles ({:+.1f}%); the wall clock leaned the other way** ({} on {}: {}{}), {} "
                   "— review on your hardware before merging.", sim.delta_pct, what, untrusted(r.platform),
                   wall, cpu, within), md("")]
    return out


def _where(summary: RunSummary, platform: str, stack: ExperimentRecord) -> str:
    """The machine a platform's numbers come from: CPU, ISA and its flags, kernel, compiler, load."""
    facts = (summary.machines or {}).get(platform)
    if facts is None or not facts.to_json():             # none, or `{}` in the file
        return stack.cpu or summary.cpus.get(platform, "")
    return one_line(facts, facts.load or None)


def notes_section(summary: RunSummary) -> list[Markdown]:
    """What the run warned about as it went (a refused request of the repository's config, a
    calibration or research caveat), each once; the messages carry repository-controlled names, so
    each is inert text (`RunSummary` already holds each once). The missing profile has the report's
    own warning at the top (`with_warning`)."""
    notes = [w for w in summary.warnings if w and w != summary.profile_missing]
    if not notes:
        return []
    return [md("## Notes from the run"), md(""), *[md("- {}", spans(w, 2000)) for w in notes], md("")]


def render_pr(summary: RunSummary) -> Markdown:
    primary = summary.primary
    experiments = summary.experiments
    stacks = summary.stacks
    ec = summary.error_control
    out = [md("# autoresearch: CPU optimizations for {}", untrusted(summary.target)), md(""), md("## Summary"), md(""),
           *(_yardstick_headline(summary) or [_headline(summary), md("")]), *guard_leaning(summary),
           *kept_off_lines(summary), _branch_line(summary, experiments), md(""),
           _how_sure(summary, ec), md("")]
    out += [md("Measured on {}: {}.", untrusted(p), untrusted(one_line(facts, facts.load or None)))
            for p, facts in (summary.machines or {}).items()] + ([md("")] if summary.machines else [])
    out += notes_section(summary)
    out += commits_section(summary)

    for platform in summary.platforms:
        out += [md("## A/B on {}", untrusted(platform)), md("")]
        stack = stacks.get(platform)
        if not stack or not stack.metrics:
            why = (md("no optimization was kept, so there is no stack to measure") if platform in summary.cpus
                   else md("no {} machine was used in this run", untrusted(platform)))
            out += [md("Not measured: {}. No numbers are shown.", why), md("")]
            continue
        out += [md("Baseline {} vs stack {} on {}: coin-ordered pairs of whole benchmark processes (A B or B A) after a "
                   "discarded warm-up; each row is judged on its pairs.", code(summary.base_commit[:12]),
                   code((stack.commit or "")[:12]), untrusted(_where(summary, platform, stack))), md("")]
        out += paired_table(stack.metrics, floor_of(summary, platform)) + [md("")]

    out += _calibration(summary)
    out += profile_section(summary.profile)
    from jobs.measure.simulate import render_section
    out += render_section(summary)
    out += [md("## Per optimization"), md(""),
            md("| experiment | platform | kind | status | {} Δ | interval (level per side) | why |", primary),
            md("|---|---|---|---|---|---|---|")]
    for e in experiments:
        m = e.metric(primary)
        out.append(md("| {} | {} | {} | {} | {} | {} | {} |", untrusted(e.name), untrusted(e.platform),
                      untrusted(e.hypothesis_kind), STATUS_WORDS.get(e.status, e.status),
                      _pct(m.delta_pct) if m else "—", _decided_interval(e, m),
                      spans(e.reason, 2000, at_start=False)))
    out.append(md(""))
    if summary.attribution:
        out += [md("## Does each commit earn its place? (leave-one-out, last-ranked first)"), md(""),
                md("While two or more commits remain, the stack is measured against itself without one of them; a "
                   "commit that shows no contribution of its own leaves the branch."), md(""),
                md("| commit | platform | status | {} Δ | interval (level per side) | why |", primary),
                md("|---|---|---|---|---|---|")]
        for a in summary.attribution:
            m = a.metric(primary)
            out.append(md("| {} | {} | {} | {} | {} | {} |", untrusted(a.name.removeprefix("attribution:")),
                          untrusted(a.platform), STATUS_WORDS.get(a.status, a.status),
                          _pct(m.delta_pct) if m else "—", _decided_interval(a, m),
                          spans(a.reason, 2000, at_start=False)))
        out.append(md(""))
    clocks = runner_table(experiments + list(stacks.values()))
    if clocks:
        out += [md("## The runner's own clocks"), md(""),
                md("Measured by the runner around each sandboxed benchmark process (medians); a candidate whose claimed "
                   "speed-up these clocks cannot account for is not kept."), md(""), *clocks, md("")]
    for e in experiments:
        if e.status == "keep":
            out += [details("{} on {}: all metrics", e.name, e.platform), md("")]
            out += paired_table(e.metrics, floor_of(summary, e.platform)) + [md(""), md("</details>"), md("")]

    failed = [e for e in experiments if e.status != "keep"]
    out += [md("## What did not work, and why"), md("")]
    out += [md("- **{}** won on its own but its commit conflicts with the ones stacked before it, so it is not in this "
               "branch; it needs rebasing onto the stack and a measurement of its own.", untrusted(name))
            for name in summary.stack_dropped]
    out += [md("- **{}** on {} ({}): {}", untrusted(e.name), untrusted(e.platform),
               STATUS_WORDS.get(e.status, e.status), spans(e.reason, 2000, at_start=False))
            for e in failed] or [md("- Everything tried was kept.")]
    out += [md("- **{}** was kept alone but showed no contribution of its own inside the stack (leave-one-out), so it "
               "is not in this branch.", untrusted(name)) for name in summary.stack_unattributed]
    out.append(md(""))
    out += failures_section(failed)
    out += noise_section(experiments + list(stacks.values()))
    if summary.sandboxed is False:
        by = summary.unsandboxed_by or "the operator's explicit opt-out"
        out += [md("**Target code ran WITHOUT a sandbox in this run** (switched off by {}): the numbers above carry no "
                   "protection against state left between benchmark processes.", by), md("")]
    out += [md("## Cost"), md(""), md("{:.2f} USD of machine time ({:.0f} s wall for this invocation).",
                                      summary.cost_usd, summary.wall_seconds), md("")]
    out += _reproduce(summary)
    out += [md("_Every number above was measured in this run._"), md("")]
    return with_warning(document(out), summary.profile_missing)


def _reproduce(summary: RunSummary) -> list[Markdown]:
    lines = summary.reproduce
    what = (md("Measures base against this branch again from a fresh clone: the branch's diff is one candidate, "
               "calibrated and judged like this run's own experiments (`--repeats N` bounds the pairs, and so the "
               "time).") if any(HEAD_PATCH in line for line in lines)    # what the lines do (a bench: always)
            else md("Runs the whole loop again from a fresh clone of the base commit (`--repeats N` bounds the pairs, "
                    "and so the time)."))
    where = md("Paste it into a shell at the root of an autoresearch checkout set up as its README says "
               "(`make demo` makes the venv `.venv`; the CLI is `.venv/bin/autoresearch`, no activation needed).")
    out = [md("## Reproduce"), md(""), what, where, md("")] + fenced("\n".join(lines), "sh") + [md("")]
    if summary.resume:
        out += [md("Re-print (or resume, if it stopped) this run, from the same checkout: {}",
                   untrusted_code(summary.resume)), md("")]
    return out
