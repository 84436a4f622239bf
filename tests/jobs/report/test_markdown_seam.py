"""One rendering seam for untrusted text (`jobs.guard.mdsafe`: `Markdown`, `md`, `document`), and one
quoting function for every printed command (`jobs.guard.shellcmd`). Issue 41: A2, A3 (rendering), A7.

1. Every report section, comment and table, rendered from hostile values (tests/mdattacks.py):
   research.md (its hypotheses, notes, findings, "What was scanned", the callgrind, gap-scan, op
   profile, fork and paper sections), pr.md (every section, the yardstick table and headline, the
   Reproduce block), the bot's comments that embed them. Nothing in them is live: no mention,
   reference, link (but the project's own), image or HTML.
2. Escaped text reads as written: the research of a Makefile's `CFLAGS ?= -O2 -g` shows that line
   as code and `-O3` as `-O3`, with no backslash in the file or on the page.
3. A printed command pasted into a shell runs nothing a branch, URL, path or candidate name carries.
4. The seam cannot be skipped silently: a document made of a plain string fails, and nothing but
   `jobs.guard.mdsafe` makes `Markdown`.
"""
from __future__ import annotations

import ast
import re
import subprocess
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.commands import parse_comment
from bot.flow import Flow
from bot.ports import Reply
from bot.status import command_failed_reply, help_reply, pr_body
from jobs.guard import mdsafe
from jobs.guard.mdsafe import Markdown, document, md
from jobs.contract.model import Evidence, Hypothesis
from jobs.report.report import finding_line, render_pr, render_research, with_warning
from jobs.report.report_review import reproduce_lines
from jobs.run.reporting import Reporting
from jobs.contract.runstate import RunState
from jobs.research import callgrind, clib, forks, gapscan, papers
from jobs.research import profile as P
from jobs.research.sources import Sources
from jobs.contract.runsummary import RunStopped
from jobs.guard.shellcmd import command
from jobs.measure.simulate import headline, render_section
from mdattacks import ATTACKS, MD, live, visible
from summaries import run_summary
from test_report import metric

ROOT = Path(__file__).resolve().parents[3]
FORK_URL, COMMIT_URL, PAPER_URL = ("https://github.com/forker/synth", "https://github.com/forker/synth/commit/c1",
                                   "http://arxiv.org/abs/2505.00001v1")


def sim_runner() -> dict:
    return {"pairs": 7, "stopped": "keep",
            "simulated": {"base_cycles": 1_000_000, "head_cycles": 900_000, "delta_pct": -10.0, "floor_pct": 0.5},
            "wall_guard": {"lo_pct": -3.7, "hi_pct": 6.8, "alpha": 0.05, "pairs": 7, "confirmed": True}}


def hostile_summary(evil: str, **kw):
    """A run whose every repository-controlled string is `evil`: the target, platform and metric
    names, a candidate `{evil}-x.patch`, reasons, flags, commits, the profile, warnings, the branch."""
    name = f"{evil}-x.patch"
    facts = {"cpu": evil, "cpus": 2, "arch": evil, "isa": evil, "flags": [evil], "kernel": evil, "compiler": evil}

    def experiment(status: str, **more) -> dict:
        return dict(name=name, hypothesis=name, platform=evil, status=status, hypothesis_kind=evil,
                    reason=f"{evil} `{evil}`", metrics=[metric(evil, 12.3, 0.0004)], flags=[evil, evil],
                    runner=sim_runner(), alpha=0.01, **more)
    fields = dict(
        run_id="r1", target=evil, repo=evil, base_commit="a" * 40, branch=f"autoresearch/{evil}", platform=evil,
        platforms=[evil, f"{evil}-arm"], cpus={evil: evil}, cpu=evil, machines={evil: facts}, agent=evil, primary=evil,
        calibration={evil: {evil: dict(n_pairs=10, sd_log=0.06, aa_delta_pct=0.4, aa_p_value=0.6, order_effect_pct=-1.2,
                                       drift=True, false_win_rate=0.003, mde_pct=7.1, mean_pairs_null=14.0,
                                       mean_pairs_at_mde=18.5, floor_pct=1.0, repeats=40)}},
        experiments=[experiment("keep"), experiment("discard"),
                     experiment("checks_failed", failure_output=f"{evil}\n```\n@octocat <img src=x>")],
        commits=[{"hypothesis": name, "commit": "c" * 40, "files": [f"bench/{evil}"],
                  "stat": f" bench/{evil} | 2 +-\n```\n@octocat"}], diffstat=f"{evil}\n````\n#1",
        hypotheses={name: {"id": name, "title": evil, "evidence": [{"where": evil, "note": evil}, {"where": "x"}]}},
        stack_applied=[name], stack_dropped=[name], stack_unattributed=[name],
        attribution=[dict(name=f"attribution:{name}", platform=evil, status="discard", reason=evil,
                          metrics=[metric(evil, 1.0, 0.5)], runner=sim_runner())],
        sandboxed=False, unsandboxed_by=evil, profile_missing=evil,
        noise={evil: {"history": [{"name": evil, "noise_pct": 3.0, "pairs": 8}], "pool_pairs": 8}},
        profile={"command": evil, "cpu": evil, "workloads": [{"name": evil, "graphs": 2, "tokens": 4, "total_ms": 1.0,
                                                              "threads": 2, "by_op": {evil: 0.5}}]},
        simulate={evil: {"aa_delta_pct": 0.001, "base_cycles": 1000, "seconds": 10.0, "native_seconds": 1.0,
                         "separate_build": True}},
        error_control={"alpha": 0.05, "family": 8, "platforms": 1},
        stacks={evil: dict(name="stack", platform=evil, status="keep", reason=evil, commit="b" * 40, cpu=evil,
                           metrics=[metric(evil, 11.0, 0.0001)], runner=sim_runner(), flags=[evil])},
        floor_pct={evil: 1.0}, branch_note=evil, resume=f"autoresearch run {evil}",
        reproduce=reproduce_lines(f"https://example.invalid/{evil}.git", "a" * 40, f"autoresearch/{evil}",
                                  [evil, "OMP"], 5, evil),
        warnings=(evil, f"the config's `sandbox.env` asks for {evil}, which the operator does not allow"))
    return run_summary(**{**fields, **kw})


def variants(evil: str) -> list:
    """The run's headline in each of its shapes: the yardstick's, the wall clock's, a stack the
    re-measure did not confirm, nothing kept at all."""
    s = hostile_summary(evil)
    unconfirmed = {evil: replace(s.stacks[evil], status="discard", runner={})}
    return [s, hostile_summary(evil, simulate=None),
            hostile_summary(evil, simulate=None, stacks=unconfirmed, branch_left=False),
            hostile_summary(evil, simulate=None, stacks={}, stack_applied=[], branch_left=False,
                            experiments=[replace(s.experiments[1])])]


def hostile_research(evil: str, tmp_path: Path) -> Markdown:
    """research.md as `jobs.run.research_phase` writes it, from hostile hypotheses, notes, findings, config
    names (`research.backends` / `recipes` / `forks` / `papers`) and every source's section."""
    h = Hypothesis(id=evil, title=evil, kind=evil, rationale=f"{evil} `{evil}`", expected=evil, ops=[evil, evil],
                   evidence=[Evidence(evil, f"`{evil}` {evil}"), Evidence(f"profile:{evil}", evil)], score=1.0,
                   recipe=evil)
    head = render_research(evil, "a" * 40, [h], [evil, f"`{evil}` {evil}"], [finding_line(evil, evil)], evil)
    research = SimpleNamespace(recipes=[evil], backends=[evil], forks=[evil], papers=[evil], roofline=None,
                               profile=None)
    spot = callgrind.Spot(evil, evil, 10, 0.5, 0.3, evil)
    prof = callgrind.CallProfile(1000, [spot], [spot], [spot], [callgrind.Remark(evil, 3, evil)], evil, evil, [evil])
    coverage = clib.scanned(tmp_path, SimpleNamespace(research=research, editable=[]), sources_ran=True, findings=1,
                            candidates=1, prof=prof, hypotheses=0)
    seq = gapscan.FusedSeq(evil, (evil, evil), evil, 3, evil)
    node = P.Node(0, evil, evil, 1, 50, evil, (1, 1, 1, 1), (-1, -1, -1), evil)
    sources = Sources(
        gaps=gapscan.GapScan({gapscan.CPU: [seq], evil: [seq]}, [gapscan.Gap((evil,), {evil: [seq]}, seq, 1.0, [(evil,)])],
                             evil, 1),
        leads=[forks.Lead(evil, FORK_URL, 3, evil, 1, 2, [("c1" * 5, evil, COMMIT_URL)], [forks.ChangedFile(evil, 1, 2)],
                          note=evil)],
        papers=[papers.Paper(evil, evil, PAPER_URL, evil)],
        profile=P.Profile([P.Workload(evil, 4, [P.Graph(1, 2, 100, [node, node])], 1)], evil, evil, [evil]),
        profile_sequences={evil: [(evil,)]}, notes=[evil])
    return document([with_warning(head, evil), *coverage, *callgrind.render(prof), sources.markdown()])


OWN_LINKS = {FORK_URL, COMMIT_URL, PAPER_URL}


def tables_hold(text: str) -> bool:
    """Every table the text lays out (a `|---|` delimiter row) is parsed as one: no value broke its rows."""
    return len(re.findall(r"^\|---", text, re.M)) == sum(t.type == "table_open" for t in MD.parse(text))


@pytest.mark.parametrize("evil", ATTACKS)
def test_every_section_of_research_md_keeps_hostile_text_inert(evil, tmp_path):
    text = hostile_research(evil, tmp_path)
    assert "## What was scanned" in text and "## Forks and competing repositories" in text
    assert live(text, OWN_LINKS) == [], (evil, text)
    assert tables_hold(text), (evil, text)
    scheme = document(forks.render([forks.Lead(evil, f"javascript:alert(1)//{evil}")], [evil]))
    assert live(scheme) == [], (evil, scheme)                        # a link only to an http(s) URL
    odd = document(papers.render([papers.Paper(evil, evil, "https://a.example/x) [b](https://evil.example", evil)], []))
    assert live(odd) == ["link_open:https://a.example/x%29%20%5Bb%5D%28https://evil.example"], (evil, odd)   # one link


@pytest.mark.parametrize("evil", ATTACKS)
def test_every_section_of_pr_md_keeps_hostile_text_inert(evil):
    for s in variants(evil):
        text = render_pr(s)
        assert live(text) == [] and tables_hold(text), (evil, text)
        fences = [t for t in MD.parse(text) if t.type == "fence"]
        reproduce = [t for t in fences if t.info == "sh"]                  # Reproduce stays one block, whole
        assert len(reproduce) == 1 and reproduce[0].content.rstrip("\n").endswith('cat "$work/run/pr.md"')
    yardstick = document(render_section(variants(evil)[0]) + headline(variants(evil)[0]))
    assert "| experiment | platform | simulated cycles" in yardstick and "decided by the deterministic yardstick" \
        in yardstick
    assert live(yardstick) == [] and tables_hold(yardstick), (evil, yardstick)                # A3: `@octocat-and-#1-x.patch` in the table


@pytest.mark.parametrize("evil", ATTACKS)
def test_the_bot_comments_that_embed_the_reports_keep_them_inert(evil, tmp_path):
    posted = []
    gh = SimpleNamespace(comment=lambda issue, body: posted.append(body))
    rec = SimpleNamespace(run_id="7-abc", issue=7)
    prep = SimpleNamespace(layout=SimpleNamespace(out=tmp_path), config=SimpleNamespace(agent=evil))
    (tmp_path / "research.md").write_text(hostile_research(evil, tmp_path), encoding="utf-8")
    Flow.publish(SimpleNamespace(gh=gh), rec, prep, RunStopped("7-abc", evil, str(tmp_path / "research.md")))
    unkept = variants(evil)[3]
    (tmp_path / "pr.md").write_text(render_pr(unkept), encoding="utf-8")
    Flow.publish(SimpleNamespace(gh=gh), rec, prep, unkept)             # nothing kept: the report as a comment
    assert len(posted) == 2 and all(isinstance(body, Markdown) for body in posted)
    assert "## What was scanned" in posted[0] and "## Summary" in posted[1]
    invalid = parse_comment(f"/autoresearch {evil}")
    bodies = posted + [pr_body(render_pr(variants(evil)[0]), 7, evil, True),
                       help_reply(getattr(invalid, "reason", evil)), command_failed_reply(evil, evil, 2, 30),
                       command_failed_reply(evil, evil, 0, 30)]
    for body in bodies:
        assert live(body, OWN_LINKS) in ([], ["#7"]), (evil, body)      # `Closes #7`: the bot's own reference


# -- 2. escaped text reads as written ---------------------------------------------------------------

def test_research_on_a_makefile_shows_its_flags_line_as_code_and_no_backslash(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "Makefile").write_text("CFLAGS ?= -O2 -g\nall:\n\tcc $(CFLAGS) x.c\n")
    notes: list[str] = []
    found = clib.build_option_hypotheses(tree, ["Makefile"], tmp_path / "patches", None, notes)
    text = render_research("t", "a" * 40, found, notes, [finding_line("x.c:3", "a `tmp` pass")], "offline")
    codes = [c.content for t in MD.parse(text) for c in (t.children or []) if c.type == "code_inline"]
    assert "CFLAGS ?= -O2 -g" in codes and "Makefile:1" in codes and "tmp" in codes
    assert "Why: -O3 adds loop vectorisation" in text            # the file itself, as a terminal shows it
    assert "\\" not in text, [line for line in text.splitlines() if "\\" in line]
    assert "Why: -O3 adds loop vectorisation" in visible(text) and "\\" not in visible(text)


PLAIN = ["CFLAGS ?= -O2 -g", "-O3", "12.3%", "+1.2%", "x86-64-v3", "a_b*c d", "(simulate.separate_build)", "-",
         "tg128 -0.4%…+3.1%", "1.5", "don't"]


@pytest.mark.parametrize("s", PLAIN)
def test_text_without_markup_is_printed_as_it_is(s):
    for template in ("Why: {}", "| {} | x |", "**{}**", "{}"):
        assert md(template, s) == template.format(s) or (template == "{}" and s == "-"), (template, s)
    assert mdsafe.spans(f"`{s}` {s}", at_start=False).replace(mdsafe.code(s), "") == f" {s}"


def unstyled(s: str) -> str:
    return re.sub(r"[*_~\s]", "", s)


@pytest.mark.parametrize("s", ATTACKS)
def test_hostile_text_reads_as_written_wherever_a_template_puts_it(s):
    """Escaped, every value still shows exactly its one-line form (emphasis may style it, no more)."""
    for template, before, after in (("Why: {} end", "Why: ", " end"), ("- {}", "", ""), ("### {}", "", ""),
                                    ("| a | b |\n|---|---|\n| {} | x |", "ab", "x")):
        seen = visible(md(template, s))
        assert unstyled(seen) == unstyled(before + mdsafe.one_line(s, mdsafe.LONG) + after), (template, s, seen)


# -- 3. every printed command is quoted ----------------------------------------------------------------

STUBS = """set -e
git() { printf '%s\\n' git "$@" >> "$LOG"; }
mktemp() { mkdir -p "$HERE/work"; echo "$HERE/work"; }
cat() { :; }
"""


def run_pasted(lines: list[str], here: Path) -> list[str]:
    """The printed lines pasted into bash, with git and autoresearch (the checkout's
    `.venv/bin/autoresearch`, `here` standing for the checkout) replaced by loggers of their argv."""
    log = here / "argv.log"
    log.unlink(missing_ok=True)
    cli = here / ".venv" / "bin" / "autoresearch"
    cli.parent.mkdir(parents=True, exist_ok=True)
    cli.write_text("#!/bin/bash\nprintf '%s\\n' autoresearch \"$@\" >> \"$LOG\"\n")
    cli.chmod(0o755)
    subprocess.run(["bash", "-c", STUBS + "\n".join(lines)], cwd=here, check=True, timeout=30,
                   env={"PATH": "/usr/bin:/bin", "LOG": str(log), "HERE": str(here), "OMP": "8"})
    return log.read_text().splitlines()


def test_a_pasted_reproduce_block_or_resume_command_runs_nothing_a_name_carries(tmp_path):
    pwned = tmp_path / "pwned"
    evil = f"x$(touch {pwned})`touch {pwned}`;touch {pwned} #"
    branch = f"autoresearch/{evil}"
    cli = reproduce_lines(f"{tmp_path}/{evil}", "a" * 40, branch, ["OMP", evil], 3, "none")
    argv = run_pasted(cli, tmp_path)
    assert f"origin/{branch}" in argv and f"{tmp_path}/{evil}" in argv        # A7: the CLI's block
    bot = reproduce_lines(f"https://x.example/{evil}.git", "a" * 40, branch, [], None, "none",
                          branch_url=f"https://y.example/{evil}.git")
    assert branch in run_pasted(bot, tmp_path) and f"https://y.example/{evil}.git" in run_pasted(bot, tmp_path)
    again = reproduce_lines(str(tmp_path), "a" * 40, None, [], None, evil, [f"c/{evil}.patch"], candidates_in_repo=True)
    argv = run_pasted(again, tmp_path)
    assert evil in argv and f"{tmp_path}/work/target/c/{evil}.patch" in argv
    argv = run_pasted(reproduce_lines(str(tmp_path), "a" * 40, None, [], None, "none", [f"/p/{evil}.patch"]), tmp_path)
    assert f"/p/{evil}.patch" in argv
    resume = Reporting.resume_command(SimpleNamespace(
        published=None, state=RunState(tmp_path, bench_env_names=["OMP"]), repo=tmp_path / evil, run_id="r1", out=tmp_path / evil,
        executor=evil, repeats=4))
    argv = run_pasted([resume], tmp_path)
    assert argv == ["autoresearch", "run", str(tmp_path / evil), "--run-id", "r1", "--out", str(tmp_path / evil),
                    "--executor", evil, "--repeats", "4"]
    assert not pwned.exists()
    assert command("a", "b c", env=["OMP", "$(x)"]) == 'OMP="$OMP" a \'b c\''     # a name no shell variable has: left out


# -- 4. the seam cannot be skipped -------------------------------------------------------------------

def test_a_document_of_plain_strings_is_refused():
    with pytest.raises(TypeError):
        document([md("# title"), "@octocat"])
    with pytest.raises(TypeError):
        Reply("autoresearch: @octocat")
    with pytest.raises(TypeError):
        pr_body("# report", 1, "none", True)
    assert isinstance(md("x") + "y", str) and not isinstance(md("x") + "y", Markdown)   # `+` drops the type
    assert not isinstance(f"{md('x')}", Markdown) and not isinstance(md("x").strip(), Markdown)


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Name) and n.func.id == name) or (isinstance(n.func, ast.Attribute) and n.func.attr == name))]


RENDERED_FROM_DISK = {"bot/flow.py", "bot/bench.py", "bot/status.py"}     # pr.md, research.md, a record's best line


def test_markdown_is_made_only_by_the_seam_and_its_templates_are_the_projects_own():
    wrong = []
    for path in sorted((ROOT / "jobs").rglob("*.py")) + sorted((ROOT / "bot").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel == "jobs/guard/mdsafe.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        wrong += [f"{rel}:{c.lineno}: Markdown(...) outside jobs.guard.mdsafe" for c in calls(tree, "Markdown")]
        for c in calls(tree, "md") + calls(tree, "details"):
            first = c.args[0] if c.args else None
            literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
            constant = isinstance(first, ast.Name) and first.id.isupper()
            if not (literal or constant):
                wrong.append(f"{rel}:{c.lineno}: a template that is not a literal (an f-string, a variable)")
        if rel not in RENDERED_FROM_DISK:
            wrong += [f"{rel}:{c.lineno}: mdsafe.rendered outside {sorted(RENDERED_FROM_DISK)}"
                      for c in calls(tree, "rendered")]
    assert wrong == []
