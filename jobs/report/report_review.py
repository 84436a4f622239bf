"""The parts of pr.md a reviewer reads first: what each kept commit touches, how sure the
result is (in the keep rule's own one-sided terms), what failed and why, and one command that
measures base against head again from scratch. Pure: a run's typed records in, Markdown lines out.

Every line is `jobs.guard.mdsafe.Markdown`, built with `md(template, *values)`: a string that comes
from the target repository (paths, commit subjects, hypothesis text from its code, evidence,
platform names, failure output) is escaped where it enters the template unless a helper already
made it markup for its context: `untrusted()` (prose, headings, list items, table cells, with its
own limit), `untrusted_code()` (an inline code span), `spans()` (the run's notes and reasons,
whose backticks mark code), `details()` (a `<summary>`), `fenced()` (a code block: nothing in
it is live; its fence is longer than any backtick run inside). The Reproduce lines are shell,
every word quoted by `jobs.guard.shellcmd`.
"""
from __future__ import annotations

import re

from jobs.contract.model import ExperimentRecord, Hypothesis, MetricResult
from jobs.guard import mdsafe
from jobs.guard.mdsafe import Markdown, code, details, indent, join, md, spans
from jobs.contract.runsummary import RunSummary
from jobs.guard.shellcmd import Raw, command, under

FAILURE_LINES = 12          # lines of a failed step's output shown in pr.md
FAILED_STEPS = ("build_failed", "checks_failed", "crash", "timeout")


def untrusted(text: str) -> Markdown:
    """Repo-controlled text entering pr.md as prose, a heading, a list item or a table cell."""
    return mdsafe.text(text, 2000)


def untrusted_code(text: str) -> Markdown:
    """Repo-controlled text as an inline code span (its own backticks included)."""
    return code(text, 300)


def pct(value: float | None) -> str:
    return "?" if value is None else f"{value:+.1f}%"


def fenced(text: str, info: str = "") -> list[Markdown]:
    """`text` in a code fence longer than any backtick run inside it, so it cannot close the fence."""
    return [mdsafe.fence(text.rstrip("\n").split("\n"), info)]


# -- how sure: the keep's own rule -------------------------------------------------------------

def interval(m: MetricResult | None) -> str:
    """`+1.2%…+8.0% (0.018)`: the interval at the level per side it was decided at ("—": no metric)."""
    if m is None:
        return "—"
    at = f" ({m.alpha:.2g})" if m.alpha else ""
    lo, hi = m.ci_low_pct, m.ci_high_pct
    if (lo is None or lo <= -99.95) and hi is None:
        return f"unbounded{at}: too few pairs at this level"    # e.g. a futility stop after a few pairs
    return f"{pct(lo)}…{pct(hi)}{at}"


def decision(m: MetricResult, floor_pct: float | None) -> str:
    """The verdict of one metric in the words of the rule that made it: a one-sided interval
    at the experiment's level against the floor."""
    lo, hi, verdict = m.ci_low_pct, m.ci_high_pct, m.verdict
    floor = f"{floor_pct:.3g}%" if floor_pct is not None else "run's"     # a raised floor: 9.90679 → 9.91%
    if verdict == "win":
        return f"win: interval clears the {floor} floor"
    if verdict == "loss":
        return "loss: measured worse"
    if verdict == "untrusted":
        return "untrusted: too few complete pairs"
    if lo is not None and hi is not None and (lo > 0 or hi < 0):
        return f"real but inside the {floor} floor"
    return "no detectable difference"


def paired_table(metrics: list[MetricResult], floor_pct: float | None) -> list[Markdown]:
    """One row per metric, the numbers the verdict used: the paired estimate over n pairs and its
    interval at the level per side. Arm means are context only (the test uses the pairs)."""
    rows = [md("| metric | pairs | Δ (paired estimate) | interval (level per side) | decision | "
               "base → head mean (context) |"), md("|---|---|---|---|---|---|")]
    for m in metrics:
        pairs = m.n_pairs or min(m.n_base or 0, m.n_head or 0)
        rows.append(md("| {} | {} | {} | {} | {} | {} → {} |", m.name, pairs, pct(m.delta_pct), interval(m),
                       decision(m, floor_pct), _num(m.base_mean), _num(m.head_mean)))
    return rows


def _num(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"


def rule_sentence(floor_pct: float | None, alpha: float | None, simulated: bool = False) -> Markdown:
    """`simulated`: keeps were decided on simulated cycles, so the sentence says that first."""
    floor = f"{floor_pct:.3g}%" if floor_pct is not None else "run's"     # "… clears the run's floor"
    run = f"the run's {alpha:.2g} split across its experiments" if alpha else "the experiment's own"
    return md("How sure: {}the lower end of its paired one-sided interval clears the {} floor, at the level shown in "
              "brackets beside each interval ({}). Δ is the median paired change (Hodges–Lehmann) over coin-ordered "
              "pairs of whole benchmark processes.",
              md("keeps in this run are decided on simulated cycles (the deterministic yardstick section below), "
                 "with the wall-clock pairs as a guard against a regression; on the wall clock alone a change would "
                 "be kept when ") if simulated else md("a change is kept when "), floor, run)


# -- what each kept commit touches ----------------------------------------------------------------

def hypothesis_line(h: Hypothesis | None, alone: ExperimentRecord | None, primary: str) -> Markdown:
    """One line: the hypothesis, its first piece of evidence, and what it measured on its own."""
    parts = []
    if h:
        parts.append(untrusted(h.title or h.id))
        evidence = [e for e in h.evidence if not str(e.where).startswith("profile:")]
        if evidence:
            first = evidence[0]
            more = f" (+{len(evidence) - 1} more in research.md)" if len(evidence) > 1 else ""
            parts.append(md("evidence: {} {}{}", untrusted_code(first.where), spans(first.note, 2000,
                                                                                    at_start=False), more))
    if alone:
        m = alone.metric(primary)
        sim, guard = alone.simulated, alone.wall_guard
        if sim:
            # the yardstick decided it: its number first, then the wall clock's guard interval (the
            # wall-clock keep rule's own interval would read "too few pairs", which decided nothing)
            parts.append(md("alone: simulated cycles {:+.2f}% (floor {:.2g}%)", sim.delta_pct, sim.floor_pct))
            if m and guard:
                from jobs.measure.simulate import guard_interval_at
                parts.append(md("wall clock beside it {} {}, interval {}", primary, pct(m.delta_pct),
                                guard_interval_at(guard)))
        elif m:
            parts.append(md("alone: {} {}, interval {}", primary, pct(m.delta_pct), interval(m)))
    return join("; ", parts) if parts else md("no hypothesis on record")


# Paths that look like the measuring side of a project (its benchmarks, tests, checks): a commit
# that edits them may change what is measured rather than how fast the code is. A name test only:
# it cannot know what the config's commands run, so it asks the reviewer to look.
YARDSTICK_LIKE = re.compile(r"(^|[/_.-])(bench\w*|benchmarks?|perf|tests?|testing|checks?)(/|[._-]|$)", re.I)


def yardstick_like(files: list[str]) -> list[str]:
    return [f for f in files if YARDSTICK_LIKE.search(f)]


def commits_section(summary: RunSummary) -> list[Markdown]:
    commits = summary.commits or []
    if not commits:
        return []
    hyps = summary.hypotheses or {}
    alone = {e.hypothesis: e for e in summary.experiments if e.status == "keep"}
    out = [md("## What each commit changes"), md("")]
    for i, c in enumerate(commits, start=1):
        name = c.hypothesis
        out.append(md("{}. **{}** {}: {}", i, untrusted(name), code(c.commit[:12]),
                      hypothesis_line(hyps.get(name), alone.get(name), summary.primary)))
        if suspect := yardstick_like(c.files or []):
            out += [md(""), md("   **Look at this one:** it edits paths named like benchmark or test code ({}); check "
                               "that it changes the code measured, not the measurement or the checks.",
                               join(", ", [untrusted_code(f) for f in suspect]))]
        block = fenced(c.stat.rstrip("\n") or "(no file changes)")
        out += [md(""), *[indent(chunk, "   ") for chunk in block], md("")]
    total = summary.diffstat
    if total:
        out += [md("The whole branch against base {}:", code(summary.base_commit[:12])), md(""), *fenced(total), md("")]
    return out


# -- what failed ------------------------------------------------------------------------------------

def failure_excerpt(log: str, status: str, lines: int = FAILURE_LINES) -> str:
    """The first lines of the failed step's own output (the runner's log ends with
    `== <status>: <reason>` followed by that output); else the log's last lines."""
    marker = f"== {status}:"
    at = log.rfind(marker)
    if at >= 0:
        body = log[at:].splitlines()[1:]
    else:
        body = log.splitlines()[-lines:]
    body = [line for line in body if line.strip()]
    return "\n".join(body[:lines])


def failures_section(experiments: list[ExperimentRecord]) -> list[Markdown]:
    """Failed steps with the first lines of their output, folded."""
    out = []
    for e in experiments:
        excerpt = e.failure_output
        if e.status in FAILED_STEPS and excerpt:
            out += [details("{} on {}: {}: first lines of its output", e.name, e.platform, e.reason), md("")]
            out += fenced(excerpt) + [md(""), md("</details>"), md("")]
    return out


# -- noise warnings: one folded table ------------------------------------------------------------------

def noise_section(records: list[ExperimentRecord]) -> list[Markdown]:
    flagged = [(r, r.flags) for r in records if r.flags]
    if not flagged:
        return []
    total = sum(len(f) for _, f in flagged)
    out = [details("Noise warnings: {} on {} measurement(s); none of them vetoed a verdict (a noisy measurement "
                   "samples more pairs instead)", total, len(flagged)), md(""),
           md("| measurement | platform | warnings |"), md("|---|---|---|")]
    for r, flags in flagged:
        out.append(md("| {} | {} | {} |", untrusted(r.name), untrusted(r.platform),
                      join("<br>", [untrusted(f) for f in flags])))
    return out + [md(""), md("</details>"), md("")]


# -- re-measure from scratch ---------------------------------------------------------------------------

# The CLI as the README's set-up leaves it (`make demo` / `make test` make `.venv` in the checkout):
# the printed commands run from that checkout's root without activating the venv (issue 43: a bare
# `autoresearch` was "command not found" in a fresh shell). The block's first line says so.
CLI = ".venv/bin/autoresearch"
WHERE = "# run from the root of an autoresearch checkout set up as its README says (make demo makes .venv)"
HEAD_PATCH = Raw('"$work/head.patch"')  # where Reproduce puts a branch's diff, to measure it as the one candidate
TARGET, RUN = Raw('"$work/target"'), Raw('"$work/run"')


def reproduce_lines(repo: str, base: str, branch: str | None, env: list[str], repeats: int | None,
                    agent: str, candidates: list[str] | tuple[str, ...] = (), *, branch_url: str = "",
                    candidates_in_repo: bool = False) -> list[str]:
    """Shell lines that measure base against head again from a fresh clone of `repo`: the branch's
    diff becomes one candidate (`--agent none --candidate`), calibrated and judged like the run's own.
    Without a branch (nothing kept) they run the whole loop again on the base commit.
    `branch_url`: where `branch` is fetched from when the clone's `origin` does not have it (the
    bot pushes to a fork); `candidates_in_repo`: the candidates are paths inside the repository
    (the bot's `.github/autoresearch/candidates/`), taken from the fresh clone. Every word a
    repository, a pull request or the operator names is quoted (`jobs.guard.shellcmd`)."""
    cap = ("--repeats", repeats) if repeats else ()
    lines = [WHERE, "work=$(mktemp -d)", command("git", "clone", "-q", repo, TARGET),
             command("git", "-C", TARGET, "checkout", "-q", "--detach", base)]
    if branch:
        head = f"origin/{branch}"
        if branch_url:
            lines.append(command("git", "-C", TARGET, "fetch", "-q", branch_url, branch))
            head = "FETCH_HEAD"
        lines += [command("git", "-C", TARGET, "diff", "--binary", base, head, Raw(">"), HEAD_PATCH),
                  command(CLI, "run", TARGET, "--agent", "none", "--candidate", HEAD_PATCH,
                          "--out", RUN, *cap, env=env)]
    else:
        given = [w for c in candidates
                 for w in ("--candidate", under(Raw(TARGET + "/"), c) if candidates_in_repo else c)]
        lines.append(command(CLI, "run", TARGET, "--agent", agent, *given, "--out", RUN, *cap, env=env))
    return lines + [command("cat", Raw('"$work/run/pr.md"'))]
