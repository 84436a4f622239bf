"""The front of `jobs/` for the bot's two faces and the dashboard: where a run lives, planning
it, starting it, and reading it back. (The CLI, `jobs.cli`, drives `jobs.pipeline` directly.)

Workdir layout (`RunLayout`), one folder per run, `<workdir>/<owner>/<repo>/<run_id>/`:

    repo/          the clone at the base commit (the pipeline's target; its worktrees and refs)
    candidates/    maintainer patches copied from the repo's `.github/autoresearch/candidates/`
    prepared.json  what `prepare` made: base, config, the offline research, candidates
    out/           the pipeline's own files: state.json, experiments.jsonl, research.md, summary.json, pr.md

- `make_plan(config, n, executor)`: the plan, priced with the shipped SkyPilot catalog.
- `prepare(layout, base, config, executor)`: on a clone at `base`, collect the candidates, research
  once (offline: deterministic and free, nothing is spent before approval) and plan. Saved to
  `prepared.json`, so the run, perhaps in another process, hands that research to the pipeline
  instead of scanning again (`start(..., research=...)`); `load_preparation` reads it back.
- `start(layout, ...)`: the pipeline on the clone (`jobs.pipeline.Run`). When it returns or raises,
  no process the run started is alive (`ended_processes`): while it runs, the calling process is
  a child subreaper, so even a daemon that target code detached (`setsid`, double fork; possible
  only without the sandbox, whose init already kills its stragglers) stays in this process's tree,
  and at the end every process of that tree that the run started is killed and reaped. A caller
  publishes only with `start`'s summary in hand, so nothing of the target runs at that moment.
- `clean_worktrees(layout)`: the worktrees a dead run left behind, removed; `drop_branches` its refs.
- `list_runs(workdir)` / `read_run(workdir, run_id, repo)`: the run folders' contents as plain data
  (`RunFiles`), so readers such as the dashboard never need to know this layout.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from . import branches, gitops, ledger, procfs, safefs
from .cloud import catalog
from .config import ConfigError, Overrides, TargetConfig, load_config
from .errors import RunError
from .model import Hypothesis
from .operator import OperatorPolicy
from .pipeline import Run, RunOptions
from .plan import Plan
from .plan import make_plan as _make_plan
from .recipes import Detection, RecipeError, load_recipe_set
from .research.offline import Research, research
from .research.passes import Finding, Pass

CANDIDATES_DIR = ".github/autoresearch/candidates"
PREPARED = "prepared.json"
PREPARED_VERSION = 1


class PlanError(RunError):
    """The plan cannot be made (e.g. an instance type without a price)."""


@dataclass(frozen=True)
class RunLayout:
    workdir: Path
    owner: str
    repo: str
    run_id: str

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    @property
    def root(self) -> Path:
        return Path(self.workdir) / self.owner / self.repo / self.run_id

    @property
    def clone(self) -> Path:
        return self.root / "repo"

    @property
    def candidates(self) -> Path:
        return self.root / "candidates"

    @property
    def prepared(self) -> Path:
        return self.root / PREPARED

    @property
    def out(self) -> Path:
        return self.root / "out"


# -- plan ----------------------------------------------------------------------------------------
def make_plan(config: TargetConfig, n_hypotheses: int, executor: str) -> Plan:
    """`jobs.plan.make_plan` with the shipped catalog's prices."""
    try:
        return _make_plan(config, n_hypotheses, executor=executor, hourly_usd=catalog.hourly_price)
    except (catalog.CatalogError, ValueError) as exc:
        raise PlanError(f"could not price the plan: {exc}") from None


@dataclass
class Preparation:
    """A run's research and plan, made once on its clone at `base`."""
    layout: RunLayout
    base: str
    config: TargetConfig                 # the repo's config, narrowed by the command's overrides
    research: Research | None            # None when the config says `agent: none`
    candidates: list[Path]
    plan: Plan

    @property
    def n_hypotheses(self) -> int:
        return len(self.research.hypotheses) if self.research else 0


def prepare(layout: RunLayout, base: str, config: TargetConfig, executor: str) -> Preparation:
    """Candidates, offline research and plan for the clone at `layout.clone` (checked out at
    `base`); written to `layout.prepared` before it is returned."""
    shutil.rmtree(layout.candidates, ignore_errors=True)
    layout.candidates.mkdir(parents=True)
    candidates = []
    try:           # the clone is the repository's: a link (to the App's key, /dev/zero) is never followed
        for name in [n for n in safefs.list_dir(layout.clone, CANDIDATES_DIR) if n.endswith(".patch")]:
            data = safefs.read_bytes(layout.clone, f"{CANDIDATES_DIR}/{name}", safefs.PATCH_LIMIT)
            (layout.candidates / name).write_bytes(data)
            candidates.append(layout.candidates / name)
    except OSError as exc:
        raise PlanError(f"the candidate patches in {CANDIDATES_DIR} cannot be used: {exc.strerror or exc}; fix: "
                        "commit each patch there as a regular file (no links)") from None
    found = research(layout.clone, config) if config.agent != "none" else None
    n = len(found.hypotheses) if found else 0
    prep = Preparation(layout, base, config, found, candidates, make_plan(config, n + len(candidates), executor))
    data = {"version": PREPARED_VERSION, "base": base, "config": config.model_dump(mode="json"),
            "candidates": [c.name for c in candidates], "research": _research_data(found) if found else None}
    tmp = layout.prepared.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
    os.replace(tmp, layout.prepared)            # atomic: never half a preparation
    return prep


def load_preparation(layout: RunLayout, executor: str) -> Preparation | None:
    """What `prepare` saved for this run, with its plan made again (for today's executor and
    prices, so an approval given for another plan does not hold); None when there is nothing
    usable (another machine, another base, an older format): then prepare again."""
    try:
        data = json.loads(layout.prepared.read_text(encoding="utf-8"))
        if data.get("version") != PREPARED_VERSION:
            return None
        config = TargetConfig.model_validate(data["config"])
        names = [str(n) for n in data["candidates"]]
        if any(n != Path(n).name or not n.endswith(".patch") for n in names):
            return None
        candidates = [layout.candidates / n for n in names]
        if not all(c.is_file() for c in candidates):
            return None
        found = _research_from(data["research"], config) if data["research"] is not None else None
    except (OSError, ValueError, KeyError, TypeError, ConfigError, RecipeError):
        return None
    n = len(found.hypotheses) if found else 0
    return Preparation(layout, str(data["base"]), config, found, candidates,
                       make_plan(config, n + len(candidates), executor))


def _research_data(r: Research) -> dict[str, Any]:
    def finding(f: Finding) -> dict[str, Any]:
        d = asdict(f)
        d["passes"] = [{**asdict(p), "writes": sorted(p.writes), "reads": sorted(p.reads)} for p in f.passes]
        return d
    return {"hypotheses": [h.to_dict() for h in r.hypotheses], "findings": [finding(f) for f in r.findings],
            "detections": [asdict(d) for d in r.detections], "notes": list(r.notes)}


def _research_from(data: dict[str, Any], config: TargetConfig) -> Research:
    hypotheses = [Hypothesis.from_dict(h) for h in data["hypotheses"]]
    for h in hypotheses:
        h.patch = None                  # research never makes patches; candidates come from `candidates/`
    findings = [Finding(**{**f, "passes": [Pass(**{**p, "writes": set(p["writes"]), "reads": set(p["reads"])})
                                           for p in f["passes"]]}) for f in data["findings"]]
    recipes = {r.id: r for name in config.research.recipes for r in load_recipe_set(name)}
    return Research(hypotheses, findings, [Detection(**d) for d in data["detections"]], recipes,
                    [str(n) for n in data["notes"]])


# -- start ---------------------------------------------------------------------------------------
def start(layout: RunLayout, *, executor: str, overrides: Overrides = Overrides(), agent: str | None = None,
          candidates: list[Path] | tuple[Path, ...] = (), research: Research | None = None,
          on_event: Callable[[dict], None] | None = None, should_stop: Callable[[], bool] | None = None,
          operator: OperatorPolicy | None = None, slots_spent: int = 0) -> dict:
    """Run the pipeline on the run's clone (resuming whatever `layout.out` already holds), under the
    operator's decisions (`bot.settings` reads them; None: the strict defaults: always sandboxed, no
    variable passed through, the default limits). The workdir of every run is protected.
    `slots_spent`: keep slots earlier runs of the same question used (a bench's re-runs)."""
    operator = operator or OperatorPolicy(face="app")
    operator = replace(operator, protected=(*operator.protected, str(layout.workdir)))
    options = RunOptions(target=layout.clone, out=layout.out, run_id=layout.run_id, agent=agent,
                         candidates=list(candidates), executor=executor, primary=overrides.metric,
                         platforms=list(overrides.platforms) if overrides.platforms else None,
                         budget_usd=overrides.budget, research=research, operator=operator,
                         repo_identity=layout.full_name, slots_spent=slots_spent)
    with ended_processes():
        return Run(options, on_event=on_event, should_stop=should_stop).execute()



# -- what a dead run leaves behind ----------------------------------------------------------------
def clean_worktrees(layout: RunLayout) -> list[Path]:
    """Remove the worktrees a run's dead process left in its clone (all live under `out/work`)
    and that folder; the ledger and state stay. Returns the worktrees removed."""
    if not (layout.clone / ".git").is_dir():
        return []
    gone = gitops.remove_worktrees_under(layout.clone, layout.out / "work")
    shutil.rmtree(layout.out / "work", ignore_errors=True)
    return gone


def drop_branches(layout: RunLayout) -> list[str]:
    """Delete the run's local branches (`autoresearch/<run-id>` and its experiments' refs) from its
    clone: for a run that has ended without publishing them."""
    if not (layout.clone / ".git").is_dir():
        return []
    rid = layout.run_id
    return gitops.delete_branches(layout.clone, branches.run_branch(rid), branches.experiments_prefix(rid))

# -- the run's processes -------------------------------------------------------------------------
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37      # <linux/prctl.h>
END_WAIT_S = 10.0                                           # for a process in uninterruptible sleep


class ProcessesSurvived(RunError):
    """Processes the run started could not be ended; nothing may be published next to them."""


def _subreaper(on: bool | None = None) -> bool:
    """This process's child-subreaper flag (set it when `on` is given); False where unsupported."""
    libc = ctypes.CDLL(None, use_errno=True)
    if on is not None:
        return libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    flag = ctypes.c_int(0)
    return libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and bool(flag.value)


def _processes() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, start time, state) of every process on this machine (from /proc)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = procfs.stat_fields(entry)
        if fields is None:
            continue                                                # gone meanwhile
        table[int(entry)] = (int(fields[1]), fields[19], fields[0])
    return table


def descendants(root: int, skip: frozenset[tuple[int, str]] = frozenset()) -> dict[int, tuple[int, str, str]]:
    """The processes below `root`, leaving out every (pid, start time) in `skip` and what lies below it."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {}, list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if (pid, table[pid][1]) in skip:
            continue
        found[pid] = table[pid]
        todo += children.get(pid, ())
    return found


def end_processes(skip: frozenset[tuple[int, str]] = frozenset(), wait_s: float = END_WAIT_S) -> list[int]:
    """SIGKILL every descendant of this process but those in `skip` (and theirs), reap them, and
    return the pids still alive after `wait_s` (none, unless one cannot die yet)."""
    me, deadline = os.getpid(), time.monotonic() + wait_s
    while True:
        found = descendants(me, skip)
        for pid, (ppid, _, state) in found.items():
            if state != "Z":
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if ppid == me:                      # ours (orphans were re-parented to us): reap it
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        if not found or time.monotonic() > deadline:
            return sorted(pid for pid, (_, _, state) in found.items() if state != "Z")
        time.sleep(0.02)


@contextlib.contextmanager
def ended_processes() -> Iterator[None]:
    """While the block runs, orphans of what it starts are re-parented to this process (child
    subreaper) instead of init; when it ends, every process it started is killed and reaped.
    Raises ProcessesSurvived when one could not be ended (and the block itself did not raise)."""
    me = os.getpid()
    before = frozenset((pid, start) for pid, (_, start, _) in descendants(me).items())
    was = _subreaper()
    _subreaper(True)
    try:
        yield
    finally:
        try:
            left = end_processes(before)
        finally:
            if not was:
                _subreaper(False)
    if left:
        raise ProcessesSurvived(f"processes the run started are still alive after SIGKILL ({', '.join(map(str, left))}); "
                                "nothing is published while they are")


# -- reading runs back ---------------------------------------------------------------------------
def read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_records(out: Path) -> list[dict[str, Any]]:
    """The ledger's records; an unreadable ledger reads as empty (readers show what they can)."""
    try:
        return ledger.read(out)
    except ledger.LedgerError:
        return []


def spent_usd(out: Path) -> float:
    state = read_json(Path(out) / ledger.STATE) or {}
    return float(state.get("cost_usd") or 0.0)


def finished_experiments(out: Path) -> int:
    return len(ledger.finished(out)) if Path(out).exists() else 0


@dataclass(frozen=True)
class RunFiles:
    """A run folder's contents, as plain data."""
    repo: str                         # owner/name
    run_id: str
    state: dict[str, Any]
    records: list[dict[str, Any]]
    summary: dict[str, Any] | None
    primary: str | None               # the config's primary metric, when the clone is still there
    parallel: int                     # experiments per wave: 1 here, up to max_vms on cloud machines


def list_runs(workdir: Path) -> list[RunLayout]:
    """Every run folder under `workdir` that the pipeline has started, newest first."""
    found = []
    for state in Path(workdir).glob(f"*/*/*/out/{ledger.STATE}"):
        run = state.parent.parent
        found.append((state.stat().st_mtime, RunLayout(Path(workdir), run.parent.parent.name, run.parent.name, run.name)))
    found.sort(key=lambda t: t[0], reverse=True)
    return [layout for _, layout in found]


def read_run(workdir: Path, run_id: str, repo: str | None = None) -> RunFiles | None:
    """The newest run called `run_id` (of `repo`, when given), or None."""
    for layout in list_runs(workdir):
        if layout.run_id != run_id or (repo and layout.full_name != repo):
            continue
        state = read_json(layout.out / ledger.STATE) or {}
        try:
            config = load_config(layout.clone)
        except (ConfigError, OSError, ValueError):
            config = None
        platforms = list(state.get("platforms") or [])
        cloud = bool(platforms) and platforms != ["local"] and config is not None
        return RunFiles(layout.full_name, run_id, state, read_records(layout.out),
                        read_json(layout.out / "summary.json"), config.primary.name if config else None,
                        max(1, config.budget.max_vms) if cloud else 1)
    return None
