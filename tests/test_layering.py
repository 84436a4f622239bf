"""The layout's import rules, enforced on the source (ARCHITECTURE.md: a functional core, adapters at
the edge, `bot/` above `jobs/`).

The import graph: one node per module of `jobs/` and `bot/`; an edge for every import statement
anywhere in a file (module level, inside functions, under TYPE_CHECKING: a lazy import is still a
dependency). `from P import x` names the submodule `P.x` when there is one, else `P` itself.
Importing a submodule's parent package implicitly is Python's mechanics, not an edge.

Rules:
1. No import cycles (no strongly connected component of more than one module, no self-import).
2. Floors (`FLOORS`, bottom first): a module imports modules of its own floor or below, never of a
   floor above. Every module must be placed on a floor: a new module fails here until it is.
3. Adapters (`ADAPTERS`: one per outside system) are never imported by the core: the pure
   modules (rule 4) and the bot's flow (`bot.flow`, `bot.ports`, `bot.progress`).
4. A module is *pure* when its docstring says `Pure.`, `Pure:` or `Pure;` ("Pure apart from ..."
   does not count). A pure module imports no I/O: none of `IO_STDLIB` (files, paths, processes,
   sockets, signals, threads, the clock, logging, the environment) nor `IO_THIRD_PARTY` (clients
   of outside systems and web frameworks), and of this project only other pure modules and the
   plain-data modules in `DATA_MODULES` (types whose import performs no I/O).
5. `jobs/` never imports `bot/`; `kernels/` imports no project Python; neither `jobs/` nor `bot/` imports
   `tools/` (not shipped); a module past `MODULE_ALARM` lines or a package past `PACKAGE_ALARM`
   asks for a look (a smell, not a cap that splits concepts); `jobs/` has at most
   `MAX_JOBS_ENTRIES` entries (its packages and its fronts).
6. No call loop the import graph cannot see: in `bot/`, a parameter named `flow` (the flow handed
   to a module it imports, which calls back into it) is annotated with a protocol of `bot.ports`
   that says what is used of it, never left bare nor `Any`.
7. A top-level class name means one thing: no two modules of `jobs/` and `bot/` define the same one.
8. One front door (issue 42): a module of `bot/` imports from `jobs/` only `jobs.api` or a module of
   `BOT_MAY_IMPORT` (seams that are not calls into the engine), and a pure one of them also the
   plain data of `BOT_CORE_MAY_IMPORT` (it cannot import `jobs.api`, which runs the pipeline).
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGES = ("jobs", "bot")
FLOORS: list[tuple[str, tuple[str, ...]]] = [   # bottom first; "x.*" is x and everything under it
    # jobs: one floor per package (each package's docstring says what it owns and may import)
    ("guard", ("jobs", "jobs.guard.*")),
    ("contract", ("jobs.contract.*",)),
    ("stats", ("jobs.stats.*",)),
    ("measure", ("jobs.measure.*",)),
    ("executors", ("jobs.executors.*",)),
    ("research", ("jobs.research.*",)),
    ("agent", ("jobs.agent.*",)),
    ("report", ("jobs.report.*",)),
    ("run", ("jobs.run.*",)),
    ("jobs fronts", ("jobs.api", "jobs.cli")),
    ("bot core", ("bot", "bot.commands", "bot.approval", "bot.routing", "bot.status", "bot.record")),
    ("bot flow", ("bot.ports", "bot.progress", "bot.planning", "bot.execution", "bot.bench", "bot.flow")),
    ("bot adapters", ("bot.settings", "bot.github", "bot.store", "bot.issuestore", "bot.jobqueue", "bot.gitclone",
                      "bot.intake")),
    ("bot shells", ("bot.tasks", "bot.action", "bot.app", "bot.cli", "bot.dashboard.*")),
]
ADAPTERS = {   # module (or "x.*") -> the outside system it speaks to
    "bot.store": "Redis", "bot.jobqueue": "RQ", "bot.github": "GitHub's REST API",
    "bot.issuestore": "GitHub issue comments", "bot.gitclone": "git remotes", "bot.app": "HTTP (Flask)",
    "bot.settings": "the environment", "bot.intake": "Redis", "jobs.executors.cloud.*": "SkyPilot", "jobs.executors.skypilot": "SkyPilot",
    "jobs.research.forks": "GitHub's REST API", "jobs.research.papers": "arXiv", "jobs.agent.claude": "Anthropic",
    "jobs.guard.gitops": "git", "jobs.guard.sandbox": "bubblewrap", "jobs.guard.sandboxinit": "the C compiler",
}
FLOW = {"bot.flow", "bot.ports", "bot.progress", "bot.planning", "bot.execution", "bot.bench"}
DATA_MODULES = {"jobs.contract.config", "jobs.contract.model", "jobs.contract.spec", "jobs.contract.errors"}
IO_STDLIB = {"os", "io", "sys", "pathlib", "glob", "shutil", "tempfile", "subprocess", "socket", "ssl", "select",
             "selectors", "signal", "threading", "multiprocessing", "concurrent", "asyncio", "fcntl", "ctypes",
             "mmap", "time", "logging", "uuid", "http", "urllib", "ftplib", "smtplib", "sqlite3", "webbrowser"}
IO_THIRD_PARTY = {"requests", "httpx", "urllib3", "redis", "rq", "flask", "werkzeug", "gunicorn", "githubkit",
                  "anthropic", "sky", "boto3", "botocore", "selenium"}
MUST_BE_PURE = {"jobs.contract.branches", "bot.commands", "bot.approval", "bot.routing", "bot.status", "bot.record", "bot.dashboard.view",
                "jobs.contract.plan", "jobs.contract.results", "jobs.stats.sequential", "jobs.stats.meanbound", "jobs.stats.power", "jobs.stats.integrity", "jobs.stats.verdict", "jobs.stats.calibration", "jobs.guard.mdsafe",
                "jobs.stats.stats", "jobs.stats.carryover", "jobs.measure.cgoutput"}
MODULE_ALARM = 700          # lines: past it, a module asks for a look
PACKAGE_ALARM = 3000        # lines of a package of jobs/ (or a folder of bot/)
MAX_JOBS_ENTRIES = 12
PURE = re.compile(r"\bPure[.:;]")
BOT_FRONT_DOOR = "jobs.api"   # what the bot calls of jobs; it may import anything in jobs (floor "jobs fronts")
BOT_MAY_IMPORT = {   # besides the front door, for any module of bot/: a seam, not a call into the engine
    # The Markdown seam: every comment, plan and PR body the bot writes is a `Markdown` built with
    # `md`/`document`, the one escaping the reports use too; a value type and its builders.
    "jobs.guard.mdsafe",
    # The `autoresearch` command's jobs half: bot/cli.py and `python -m bot.action` hand it argv and
    # add their subcommands to its parser (`extend=`); the console script, not an API call.
    "jobs.cli",
}
BOT_CORE_MAY_IMPORT = {   # for the bot's pure modules only: jobs.api is not pure (rule 4), so they
    # read the plain data they need where it lives.
    "jobs.contract.config",       # `Overrides`: what a command asks (bot.commands, bot.record); in DATA_MODULES
    "jobs.contract.results",      # pure readers of a record (bot.status, bot.dashboard.view)
    "jobs.contract.runsummary",   # the summary's type and its records' (bot.dashboard.view, bot.status)
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@lru_cache(maxsize=1)
def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
            if "__pycache__" not in p.parts}


def _resolve(name: str) -> str | None:
    """The project module an imported dotted name lives in (its longest known prefix)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in modules():
            return ".".join(parts[:i])
    return None


@lru_cache(maxsize=None)
def imports(module: str) -> tuple[set[str], set[str]]:
    """(project modules, top-level outside names) that `module` imports, anywhere in its text."""
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    project, outside = set(), set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            names = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules() else origin for a in node.names]
        else:
            continue
        for name in names:
            found = _resolve(name)
            if found:
                project.add(found)
            elif name.split(".")[0] not in PACKAGES and name != "__future__":
                outside.add(name.split(".")[0])
    return project, outside


def matches(module: str, pattern: str) -> bool:
    if pattern.endswith(".*"):
        return module == pattern[:-2] or module.startswith(pattern[:-1])
    return module == pattern


def floor(module: str) -> int | None:
    for i, (_, patterns) in enumerate(FLOORS):
        if any(matches(module, p) for p in patterns):
            return i
    return None


def adapter(module: str) -> str | None:
    return next((system for p, system in ADAPTERS.items() if matches(module, p)), None)


def declared_pure(module: str) -> bool:
    doc = ast.get_docstring(ast.parse(modules()[module].read_text(encoding="utf-8"))) or ""
    return bool(PURE.search(doc))


def test_the_graph_sees_the_code():
    assert len(modules()) > 60 and "bot.flow" in modules() and "jobs.run.pipeline" in modules()
    assert "jobs.contract.errors" in imports("jobs.agent.claude")[0]                    # a plain from-import
    assert "jobs.run.dryrun" in imports("jobs.cli")[0]                              # a lazy one, in a function
    assert "jobs.executors.cloud.catalog" in imports("jobs.executors.skypilot")[0]        # `from ..cloud import catalog`
    assert {"redis", "rq"} <= imports("bot.jobqueue")[1]


def test_no_import_cycles():
    graph = {m: imports(m)[0] for m in modules()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:            # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                cycles.append(sorted(component))
    for m in sorted(graph):
        if m not in index:
            visit(m)
    assert cycles == []


def test_every_module_is_on_a_floor_and_no_import_runs_back_up():
    unplaced = sorted(m for m in modules() if floor(m) is None)
    assert unplaced == [], "place these modules on a floor in FLOORS (tests/test_layering.py)"
    upward = sorted(f"{m} ({FLOORS[floor(m)][0]}) -> {d} ({FLOORS[floor(d)][0]})"
                    for m in modules() for d in imports(m)[0] if floor(d) > floor(m))
    assert upward == []


def test_the_core_never_imports_an_adapter():
    core = {m for m in modules() if declared_pure(m)} | FLOW
    offenders = sorted(f"{m} -> {d} ({adapter(d)})" for m in core for d in imports(m)[0] if adapter(d))
    assert offenders == []
    flow_outside = sorted(f"{m} -> {name}" for m in FLOW for name in imports(m)[1] if name in IO_THIRD_PARTY)
    assert flow_outside == []            # the flow reaches Redis, RQ, GitHub only through bot.ports


def test_pure_modules_import_no_io():
    pure = {m for m in modules() if declared_pure(m)}
    assert MUST_BE_PURE <= pure, f"these say Pure no longer: {sorted(MUST_BE_PURE - pure)}"
    offenders = []
    for m in sorted(pure):
        project, outside = imports(m)
        offenders += [f"{m} -> {name}" for name in sorted(outside) if name in IO_STDLIB | IO_THIRD_PARTY]
        offenders += [f"{m} -> {d} (not pure)" for d in sorted(project) if d not in pure | DATA_MODULES]
    assert offenders == []


@pytest.mark.parametrize("module,forbidden", [("jobs.contract.plan", "jobs.executors.cloud.catalog"), ("jobs.agent.claude", "jobs.run.pipeline"),
                                              ("jobs.executors.skypilot", "jobs.executors"),
                                              ("bot.action", "bot.tasks"), ("bot.flow", "bot.store")])
def test_the_imports_issue_13_named_are_gone(module, forbidden):
    assert forbidden not in imports(module)[0]


def test_jobs_never_imports_bot():
    offenders = [m for m in modules() if m.startswith("jobs") and any(d.startswith("bot") for d in imports(m)[0])]
    assert offenders == []


def test_the_shipped_packages_never_import_the_tools():
    assert "tools" not in PACKAGES and (ROOT / "tools" / "loadbench.py").is_file()
    offenders = sorted(m for m in modules() if "tools" in imports(m)[1])
    assert offenders == []


def test_kernels_imports_no_project_python():
    offenders = []
    for path in (ROOT / "kernels").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            offenders += [f"{path.relative_to(ROOT)} -> {n}" for n in names if n.split(".")[0] in PACKAGES]
    assert offenders == []


def untyped_flow_parameters(source: str) -> list[str]:
    """Functions of `source` with a `flow` parameter that is unannotated or `Any`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                note = arg.annotation
                text = "" if note is None else note.value if isinstance(note, ast.Constant) else ast.unparse(note)
                if arg.arg == "flow" and (not text or str(text).split(".")[-1] == "Any"):
                    found.append(f"{getattr(node, 'name', 'lambda')}:{node.lineno}")
    return sorted(found)


def test_the_check_for_untyped_flow_parameters_sees_them():
    assert untyped_flow_parameters("def f(flow, x): ...\ndef g(*, flow: typing.Any): ...\nh = lambda flow: 0\n"
                                   "def k(flow: 'Any'): ...") == ["f:1", "g:2", "k:4", "lambda:3"]
    assert untyped_flow_parameters("def f(flow: RunFlow, other: Any): ...") == []


def test_a_flow_handed_to_bot_modules_is_typed_by_a_protocol():
    offenders = sorted(f"{m}.{where}" for m in modules() if m.startswith("bot")
                       for where in untyped_flow_parameters(modules()[m].read_text(encoding="utf-8")))
    assert offenders == [], "annotate these with a protocol of bot.ports (what the function uses of the flow)"


def test_no_module_or_package_is_past_the_size_alarm():
    """Size is a smell, not a rule: a module past MODULE_ALARM lines or a package past PACKAGE_ALARM
    asks for a look (is it one concept?), not for a split to fit a number."""
    long = {m: n for m in modules() for n in [len(modules()[m].read_text(encoding="utf-8").splitlines())]
            if n > MODULE_ALARM}
    assert long == {}, "look at these modules: one concept each?"
    sizes: dict[str, int] = {}
    for m, path in modules().items():
        package = m if path.name == "__init__.py" else m.rpartition(".")[0]
        if package.count(".") >= 1:
            top = ".".join(package.split(".")[:2])
            sizes[top] = sizes.get(top, 0) + len(path.read_text(encoding="utf-8").splitlines())
    assert {p: n for p, n in sizes.items() if n > PACKAGE_ALARM} == {}, "look at these packages: one concept each?"


def test_jobs_has_a_short_front_hall():
    """jobs/ holds its packages and its two fronts (api, cli), at most MAX_JOBS_ENTRIES entries."""
    entries = sorted(p.name for p in (ROOT / "jobs").iterdir() if p.name != "__pycache__")
    assert len(entries) <= MAX_JOBS_ENTRIES, entries


def top_level_classes(source: str) -> list[str]:
    return [n.name for n in ast.parse(source).body if isinstance(n, ast.ClassDef)]


def test_top_level_class_names_are_unique_across_jobs_and_bot():
    # One name, one meaning: a reader who meets `Plan` (a cost plan? a test plan?) or `Lease` should
    # not have to look at the import to know which (issue 25).
    where: dict[str, list[str]] = {}
    for m, path in modules().items():
        for name in top_level_classes(path.read_text(encoding="utf-8")):
            where.setdefault(name, []).append(m)
    assert {n: ms for n, ms in where.items() if len(ms) > 1} == {}


def test_the_class_name_check_sees_a_duplicate():
    assert top_level_classes("class Plan:\n    pass\n\nclass Other(Plan):\n    class Inner: pass\n") == ["Plan", "Other"]


def front_door_offenders(graph: dict[str, set[str]], pure: set[str]) -> list[str]:
    """`bot -> jobs` edges of `graph` past the front door and its allow-lists (rule 8)."""
    return sorted(f"{m} -> {d}" for m, deps in graph.items() if m == "bot" or m.startswith("bot.")
                  for d in deps if (d == "jobs" or d.startswith("jobs.")) and d != BOT_FRONT_DOOR
                  and d not in BOT_MAY_IMPORT and not (m in pure and d in BOT_CORE_MAY_IMPORT))


def test_the_front_door_check_sees_a_side_door():
    graph = {"bot.x": {"jobs.api", "jobs.guard.mdsafe", "jobs.contract.errors", "bot.y"},
             "bot.core": {"jobs.contract.results", "jobs.executors.registry"},
             "bot.shell": {"jobs.contract.results"}, "jobs.run.pipeline": {"jobs.contract.errors"}}
    assert front_door_offenders(graph, pure={"bot.core"}) == [
        "bot.core -> jobs.executors.registry", "bot.shell -> jobs.contract.results", "bot.x -> jobs.contract.errors"]
    assert "jobs.api" in imports("bot.tasks")[0] and "jobs.contract.errors" not in imports("bot.tasks")[0]   # `from jobs.api import RunError`
    assert "jobs.cli" in imports("bot.action")[0]                                                   # a lazy one, in main()


def test_bot_reaches_jobs_through_its_front_door():
    assert {BOT_FRONT_DOOR, *BOT_MAY_IMPORT, *BOT_CORE_MAY_IMPORT} <= set(modules())
    assert FLOORS[floor(BOT_FRONT_DOOR)][0] == "jobs fronts"      # above every package: it may import any of them
    assert BOT_CORE_MAY_IMPORT <= {m for m in modules() if declared_pure(m)} | DATA_MODULES
    pure = {m for m in modules() if declared_pure(m)}
    offenders = front_door_offenders({m: imports(m)[0] for m in modules()}, pure)
    assert offenders == [], "import these through jobs.api (re-export what is missing there, in __all__)"
