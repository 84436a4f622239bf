"""`autoresearch` command line: run, calibrate, research, demo (and serve/worker from bot/)."""
from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from jobs.contract import agentkinds
from jobs.guard import gitops
from jobs.run import preflight, runlock
from jobs.contract.config import ConfigError, load_config
from jobs.contract.errors import Terminated
from .executors.registry import DEFAULT as DEFAULT_EXECUTOR
from .executors.registry import describe_executors, executor_names
from jobs.contract.ledger import LedgerError
from jobs.run.pipeline import Run, RunCancelled, RunError, RunOptions, new_run_id
from jobs.run.progress_view import PlainView, ProgressView  # noqa: F401  (ProgressView: re-exported)
from jobs.contract.runstate import RunState
from jobs.report.report_review import interval
from jobs.research.recipes import RecipeError
from jobs.contract.runsummary import RunStopped, RunSummary

DEMO_SOURCE = Path(__file__).resolve().parent.parent / "examples" / "tinyllm"
# Piped output (CI logs, files) gets a wide fixed width so tables are not folded at 80 columns.
console = Console() if sys.stdout.isatty() else Console(width=160)


def _progress() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                    console=console, transient=False)


@contextlib.contextmanager
def _view():
    """The run's event callback: progress bars on a terminal; plain lines with heartbeats when
    stdout is a file or a pipe (rich's live bars print nothing there)."""
    if sys.stdout.isatty():
        with _progress() as progress:
            yield ProgressView(progress)
    else:
        with PlainView(sys.stdout) as view:
            yield view


def _options(args, **extra) -> RunOptions:
    """The run's options from the command line, after the checks that need nothing measured:
    TARGET is a repository with a commit, --out is not a file, the run is not already running."""
    out = Path(args.out) if args.out else None
    problems = preflight.out_problems(out)
    if problems:
        raise preflight.PreflightError(problems)
    top = preflight.target_repo(Path(args.target))
    target = Path(args.target).resolve()
    run_id = getattr(args, "run_id", None)
    if out and not run_id:
        state = RunState.load(out) if out.exists() else None
        run_id = state.run_id if state is not None and state.begun else None
    if not run_id:
        run_id = new_run_id(gitops.head_commit(top))
    out = out or Path("autoresearch-runs") / run_id
    runlock.check_free(out)
    return RunOptions(target=target, out=out.resolve(), run_id=run_id, **extra)


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM ends a run like Ctrl-C: its steps are stopped, its worktrees removed, its ledger kept
    (a resume continues it). Only around a run: `serve` and `worker` handle signals their own way."""
    def on_term(signum, frame):
        raise Terminated()
    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _print_table(summary: RunSummary) -> None:
    for platform in summary.platforms:
        if platform in summary.cpus:
            _platform_table(summary, platform)


def _platform_table(summary: RunSummary, platform: str) -> None:
    primary = summary.primary
    table = Table(title=f"Experiments on {platform} ({summary.cpus[platform]}), primary metric {primary}")
    for col in ("experiment", "status", "Δ%", "interval (level per side)", "why"):
        table.add_column(col, overflow="fold")
    for rec in (r for r in summary.experiments if r.platform == platform):
        m = rec.metric(primary)
        table.add_row(rec.name, rec.status, f"{m.delta_pct:+.1f}" if m else "—", interval(m), rec.reason)
    console.print(table)
    stack = summary.stacks.get(platform)
    if not stack:
        console.print(f"No stack on {platform}: nothing was kept.")
        return
    table = Table(title=f"A/B on {platform}: baseline vs stack of {', '.join(summary.stack_applied)} "
                        f"({stack.status})")
    for col in ("metric", "pairs", "Δ% (paired)", "interval (level per side)", "verdict"):
        table.add_column(col, overflow="fold")
    for m in stack.metrics:
        table.add_row(m.name, str(m.n_pairs or m.n_base), f"{m.delta_pct:+.1f}", interval(m), m.verdict)
    console.print(table)


def cmd_run(args) -> int:
    options = _options(args, agent=args.agent, candidates=[Path(p) for p in args.candidate],
                       repeats=args.repeats, executor=args.executor, no_sandbox=args.no_sandbox,
                       profile=getattr(args, "profile", "reuse"))
    if args.agent and not agentkinds.kind(args.agent).researches and not options.candidates:
        raise preflight.PreflightError([f"--agent {args.agent}: evaluates only --candidate patches and none was "
                                        f"given; fix: add --candidate PATCH, or use --agent {agentkinds.DEFAULT}"])
    repo = gitops.toplevel(options.target)
    options.config = load_config(repo)       # read once: the preflight checks it, the run runs by it
    preflight.check_run(repo, options.config, candidates=options.candidates, out=options.out,
                        repeats=options.repeats)
    if getattr(args, "dry_run", False):   # `demo` reuses cmd_run without the flag
        from jobs.run.dryrun import dry_run
        console.print(dry_run(options), markup=False, highlight=False, soft_wrap=True)
        return 0
    with _terminate_as_interrupt(), _view() as view:
        summary = Run(options, on_event=view).execute()
    out = options.out
    if isinstance(summary, RunStopped):
        console.print(f"\nnothing to try: {summary.why}\nresearch.md       {summary.research}")
        return 0
    _print_table(summary)
    if summary.branch_left:
        console.print(f"\nbranch    {summary.branch} in {summary.repo}")
    else:
        console.print(f"\nbranch    none left: {summary.branch_note or 'nothing was kept'}")
    for name in ("research.md", "experiments.jsonl", "pr.md", "summary.json"):
        console.print(f"{name:<18}{out / name}")
    return 0


def cmd_calibrate(args) -> int:
    options = _options(args, calibrate_only=True, agent="none", no_sandbox=args.no_sandbox)
    options.config = load_config(gitops.toplevel(options.target))
    with _terminate_as_interrupt(), _view() as view:
        result = Run(options, on_event=view).execute()
    for platform, cal in result.calibration.items():
        table = Table(title=f"A/A calibration on {platform} ({result.cpus[platform]})")
        for col in ("metric", "pairs", "noise/pair", "A/A Δ (two-sided p)", "order effect", "false-win rate",
                    "MDE (slot 1)", "pairs null/MDE", "floor", "max pairs"):
            table.add_column(col)
        for name, c in cal.items():
            table.add_row(name, str(c.n_pairs), f"{100 * c.sd_log:.2f}%",
                          f"{c.aa_delta_pct:+.2f}% ({c.aa_p_value:.3f})",
                          f"{c.order_effect_pct:+.2f}%" + (" adjusted" if c.drift else ""),
                          f"{100 * c.false_win_rate:.1f}%", f"{c.mde_pct:.1f}%",
                          f"{c.mean_pairs_null:.0f}/{c.mean_pairs_at_mde:.0f}",
                          f"{c.floor_pct:.1f}%", str(c.repeats))
        console.print(table)
    return 0


def cmd_research(args) -> int:
    options = _options(args, research_only=True, agent=args.agent, profile=args.profile)
    options.config = load_config(gitops.toplevel(options.target))
    with _terminate_as_interrupt(), _view() as view:
        result = Run(options, on_event=view).execute()
    console.print(f"{len(result.hypotheses)} hypotheses; research.md and hypotheses.json in {options.out}")
    return 0


def demo_target(dest: Path) -> Path:
    """Materialise the bundled demo as its own git repository (reused when unchanged)."""
    if not (DEMO_SOURCE / ".github" / "autoresearch.yml").is_file():
        raise RunError(f"bundled demo not found at {DEMO_SOURCE}")
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(DEMO_SOURCE, dest, ignore=shutil.ignore_patterns("*.o", "tinyllm", "tinyllm_ref", "build"))
    gitops.git(dest, "init", "-q", "-b", "main")
    gitops.commit_all(dest, "tinyllm demo target")
    return dest


def cmd_demo(args) -> int:
    args.target = str(demo_target(Path(args.workdir).resolve() / "tinyllm"))
    if args.out and (Path(args.out) / "state.json").exists():
        shutil.rmtree(args.out)   # the demo target is made afresh, so its previous run cannot resume
    args.candidate, args.run_id = [], None
    return cmd_run(args)


def cmd_reap(args) -> int:
    from jobs.executors.cloud.reaper import cli_reap
    return cli_reap(args, lambda text: console.print(text, markup=False, highlight=False))


def cmd_config(args) -> int:
    from jobs.contract import configdoc
    if args.schema:
        text = configdoc.schema_json()
    elif args.markdown:
        text = configdoc.markdown_table()
    else:
        text = configdoc.example_yaml()
    sys.stdout.write(text)
    return 0


def cmd_clean(args) -> int:
    from jobs.run import cleanup
    repo = preflight.target_repo(Path(args.target))
    leftovers, live = cleanup.find_leftovers(repo)
    for rid in live:
        console.print(f"left alone: run {rid} is running", highlight=False)
    if not leftovers:
        console.print(f"nothing to clean in {repo}", highlight=False)
        return 0
    verb = "removed" if args.yes else "would remove"
    for item in leftovers:
        console.print(f"{verb} {item.kind:<8} {item.what}  ({item.run_id}: {item.why})", markup=False, highlight=False)
    if args.yes:
        cleanup.remove(repo, leftovers)
    else:
        console.print("dry run: nothing was removed; add --yes to remove these", highlight=False)
    return 0


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; fix: give a number of pairs, e.g. 20")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} pairs cannot measure anything; fix: give 1 or more "
                                         "(leave it out to use the config's repeats.max)")
    return value


TARGET_HELP = ("the target: a git repository (with at least one commit) holding .github/autoresearch.yml; "
               "the run measures its committed HEAD")
PROFILE_HELP = ("the op profile's instrumented build (config `research.profile`): reuse (default: a profile "
                "kept in the target's .git for the same commit, recipe, build and benchmark is read instead "
                "of building; else build, run and keep it), fresh (build again), off (no profile)")
REPEATS_HELP = "most pairs of benchmark processes per experiment, N >= 1 (default: the config's repeats.max)"


def agent_help(names: list[str]) -> str:
    return ("; ".join(f"{n}: {agentkinds.kind(n).summary}" for n in names)
            + f". Default: the config's `agent` ({agentkinds.DEFAULT} when it names one whose API key is not set)")


def build_parser(extend=None) -> argparse.ArgumentParser:
    """`extend(subparsers)` lets bot/ add its commands (serve, worker, action) without jobs/
    importing bot/."""
    parser = argparse.ArgumentParser(prog="autoresearch", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, run_id=True):
        p.add_argument("--out", help="output directory (default autoresearch-runs/<run-id>); "
                                     "an existing run's folder resumes that run")
        if run_id:
            p.add_argument("--run-id", help="resume this run (its finished experiments are not re-run)")

    run = sub.add_parser("run", help="research, experiment, stack and report on TARGET")
    run.add_argument("target", help=TARGET_HELP)
    run.add_argument("--agent", choices=agentkinds.names(), help=agent_help(agentkinds.names()))
    run.add_argument("--candidate", action="append", default=[], metavar="PATCH",
                     help=f"a patch file to evaluate as a hypothesis (repeatable): {preflight.PATCH_FORMAT}; "
                          "it must apply to TARGET's HEAD and touch only `editable` paths")
    run.add_argument("--repeats", type=positive_int, metavar="N", help=REPEATS_HELP)
    run.add_argument("--executor", choices=executor_names(), default=DEFAULT_EXECUTOR,
                     help="where build, checks and benchmarks run: " + describe_executors())
    run.add_argument("--no-sandbox", action="store_true",
                     help="run target code without the bubblewrap sandbox (the report and PR body say so)")
    run.add_argument("--profile", choices=["reuse", "fresh", "off"], default="reuse", help=PROFILE_HELP)
    run.add_argument("--dry-run", action="store_true",
                     help="with --executor skypilot: print the SkyPilot tasks and the estimate, launch nothing")
    common(run)
    run.set_defaults(func=cmd_run)

    reap = sub.add_parser("reap", help="down this app's SkyPilot clusters that no live run owns")
    reap.add_argument("--dry-run", action="store_true", help="list what would be downed, down nothing")
    reap.add_argument("--lease-dir", help="the runs' lease folder (default $AUTORESEARCH_LEASE_DIR, "
                                          "else ~/.autoresearch/leases)")
    reap.add_argument("--ttl", type=float, default=600.0, help="seconds after which a silent run's lease is stale")
    reap.set_defaults(func=cmd_reap)

    cal = sub.add_parser("calibrate", help="measure this machine's noise on TARGET (A/A only)")
    cal.add_argument("target", help=TARGET_HELP)
    cal.add_argument("--no-sandbox", action="store_true", help="run target code without the sandbox")
    common(cal)
    cal.set_defaults(func=cmd_calibrate)

    res = sub.add_parser("research", help="run only the research phase")
    res.add_argument("target", help=TARGET_HELP)
    res.add_argument("--agent", choices=agentkinds.names(researching=True),
                     help=agent_help(agentkinds.names(researching=True)))
    res.add_argument("--profile", choices=["reuse", "fresh", "off"], default="reuse", help=PROFILE_HELP)
    common(res)
    res.set_defaults(func=cmd_research)

    demo = sub.add_parser("demo", help="run the whole loop on the bundled tinyllm target")
    demo.add_argument("--workdir", default=".autoresearch/demo",
                      help="where the demo target is made afresh as a git repository (default %(default)s)")
    demo.add_argument("--agent", choices=["offline"], default="offline",
                      help="the demo uses the offline agent (recipes under kernels/; no API key)")
    demo.add_argument("--repeats", type=positive_int, metavar="N", help=REPEATS_HELP)
    demo.add_argument("--executor", choices=["local"], default="local",
                      help="the demo runs on this machine only (git worktrees)")
    demo.add_argument("--no-sandbox", action="store_true", help="run target code without the sandbox")
    demo.add_argument("--out", help="output directory (default autoresearch-runs/<run-id>; `make demo` "
                                    "uses .autoresearch/demo-run); a previous demo there is replaced")
    demo.set_defaults(func=cmd_demo)

    config = sub.add_parser("config", help="the .github/autoresearch.yml reference, generated from its schema")
    form = config.add_mutually_exclusive_group()
    form.add_argument("--example", action="store_true",
                      help="a commented YAML file with every field at its default (the default output)")
    form.add_argument("--schema", action="store_true", help="the JSON schema")
    form.add_argument("--markdown", action="store_true", help="the README's table of fields")
    config.set_defaults(func=cmd_config)

    clean = sub.add_parser("clean", help="list (or, with --yes, remove) what runs that are not running left in "
                                         "TARGET: experiment branches, worktrees, build folders")
    clean.add_argument("target", help="the target git repository")
    clean.add_argument("--yes", action="store_true", help="remove them (default: a dry run that only lists them)")
    clean.set_defaults(func=cmd_clean)
    if extend:
        extend(sub)
    return parser


def main(argv: list[str] | None = None, extend=None) -> int:
    args = build_parser(extend).parse_args(argv)
    try:
        return args.func(args)
    except (RunError, RunCancelled, ConfigError, RecipeError, LedgerError, gitops.GitError) as exc:
        console.print(f"autoresearch: {exc}", style="red", markup=False, highlight=False)
        return 2
    except ModuleNotFoundError as exc:
        # A core install (`make demo`, `pip install -e .`) lacks the extras of serve/worker/action/skypilot.
        console.print(f"autoresearch {args.command}: needs the Python package {exc.name!r}, which this "
                      "install lacks; fix: .venv/bin/pip install -e '.[bot,llm,cloud]' (or `make test`)",
                      style="red", markup=False, highlight=False)
        return 2
    except KeyboardInterrupt as exc:
        how = "terminated" if isinstance(exc, Terminated) else "interrupted"
        console.print(f"[yellow]{how}; re-run with the same --run-id/--out to resume[/]")
        return 143 if how == "terminated" else 130


if __name__ == "__main__":
    sys.exit(main())
