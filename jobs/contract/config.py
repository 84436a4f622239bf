"""`.github/autoresearch.yml`: the target repository's contract with autoresearch.

Validated with pydantic; a wrong file raises ConfigError whose message names each bad field
(as a dotted path), what is wrong with it, and how to fix it. Pure apart from `load_config`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jobs.contract import agentkinds
from jobs.contract.errors import OverrideError
from jobs.contract.overrides import Overrides  # noqa: F401  (a command's arguments: `narrow` takes them; imported from here too)

CONFIG_PATH = ".github/autoresearch.yml"


class ConfigError(ValueError):
    """The config file is missing or wrong. `problems` holds one (field, message) per fault."""

    def __init__(self, source: str, problems: list[tuple[str, str]]):
        self.source = source
        self.problems = problems
        lines = [f"{source}: invalid autoresearch config"]
        lines += [f"  - {field}: {msg}" for field, msg in problems]
        super().__init__("\n".join(lines))


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Metric(Strict):
    """One number the benchmark prints as `METRIC name=value`."""

    name: str = Field(pattern=r"^[\w.µ]+$", description="as the benchmark prints it (letters, digits, _ . µ)")
    direction: Literal["higher", "lower"] = Field("higher", description="which way is better")
    primary: bool = Field(False, description="exactly one metric is primary: verdicts are decided on it")
    unit: str = Field("", description="shown in reports")
    clock: Literal["wall", "cpu"] = Field(
        "wall", description="the clock the benchmark times this metric with; the runner checks a claimed "
                            "speed-up against its own measurement of the same clock")


class Timeouts(Strict):
    """Seconds each step may take before it is stopped (status `timeout`)."""

    build: float = Field(600, gt=0, description="one build of one tree")
    benchmark: float = Field(300, gt=0, description="one benchmark process")
    checks: float = Field(600, gt=0, description="one run of the checks")
    simulate: float = Field(300, ge=0, description=(
        "without a `simulate:` workload: the most seconds the benchmark command itself may take under cachegrind "
        "for the derived yardstick (calibration tries it once per arm; slower, and the wall clock decides alone); "
        "0 (or `simulate: false`) never derives one"))


class Repeats(Strict):
    """Pairs of benchmark processes (one per arm each). An experiment samples pairs until its
    sequential test decides, from `min` on, and never more than `max`."""

    min: int = Field(3, ge=1, description="pairs before the test may stop")
    max: int = Field(40, ge=3, description="most pairs per experiment (the cost cap)")
    warmup: int = Field(1, ge=0, description="discarded warm-up processes per arm")
    calibration: int = Field(20, ge=4, description="A/A pairs measured before the experiments")

    @model_validator(mode="after")
    def _ordered(self):
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) must be >= min ({self.min})")
        return self


class Thresholds(Strict):
    """When a difference counts, and when the machine is flagged as noisy."""

    alpha: float = Field(0.05, gt=0, lt=0.5, description="chance of any false keep in a whole run")
    min_effect_pct: float = Field(1.0, ge=0, description="a keep's interval must clear this floor")
    target_mde_pct: float = Field(5.0, gt=0, description="sampling stops once effects this large (at most twice the floor) are ruled out")
    max_cv_pct: float = Field(15.0, gt=0, description="above this the report flags a noisy arm (never a veto)")
    max_spread: float = Field(3.0, gt=1, description="baseline max/min above this, with the process's own "
                                                     "time not moving along, = broken parser")

    @model_validator(mode="after")
    def _floor_below_target(self):
        if self.min_effect_pct >= self.target_mde_pct:
            raise ValueError(f"min_effect_pct ({self.min_effect_pct:g}) must be below target_mde_pct "
                             f"({self.target_mde_pct:g})")
        return self


class Integrity(Strict):
    """How a candidate's claimed speed-up is cross-checked against the runner's own clocks."""

    timed_share: float = Field(0.25, gt=0, le=1, description="the least share of one benchmark process "
                                                              "that its timed work takes")
    digests: bool = Field(True, description="require DIGEST lines equal to the baseline's when it prints them")


class Sandbox(Strict):
    """What target code may see besides its worktree: a request; the operator decides. Paths must
    lie under the operator's cache root ($AUTORESEARCH_CACHE_ROOT, default ~/.cache/autoresearch)
    and not be the root itself; checked when a run starts."""

    enabled: bool = Field(True, description="false asks to run target code unsandboxed; honoured only where the "
                                            "operator allows it (AUTORESEARCH_ALLOW_UNSANDBOXED, the CLI's "
                                            "--no-sandbox); reports say who switched it off")
    caches: list[str] = Field(default_factory=list, description="writable in build/checks, read-only in benchmark; "
                                                                "kept per repository (and per arm)")
    read_only: list[str] = Field(default_factory=list, description="read-only in every step (e.g. a model file)")
    env: list[str] = Field(default_factory=list, description="environment variables passed through, of those the "
                                                             "operator allows (AUTORESEARCH_SANDBOX_ENV); reports "
                                                             "show names, never values")

    @field_validator("caches", "read_only")
    @classmethod
    def _paths(cls, value: list[str]):
        for path in value:
            if not (path.startswith("/") or path.startswith("~/")):
                raise ValueError(f"{path!r}: use an absolute path or one starting with ~/")
            if ".." in Path(path).parts:
                raise ValueError(f"{path!r}: '..' is not allowed")
        return value

    @field_validator("env")
    @classmethod
    def _names(cls, value: list[str]):
        from jobs.guard.secrets import target_may_see
        for name in value:
            if not name.replace("_", "a").isalnum():
                raise ValueError(f"{name!r} is not an environment variable name")
            if not target_may_see(name):
                raise ValueError(f"{name!r} looks like a credential; target code never gets credentials")
        return value


class Budget(Strict):
    """Hard caps of one run."""

    usd: float = Field(30.0, ge=0, description="machine and model spend")
    max_vms: int = Field(4, ge=1, description="cloud VMs at once (the wave size)")
    max_experiments: int = Field(30, ge=1, description="experiments per run; also the size of the error-control "
                                                        "family")
    wall_hours: float = Field(4.0, gt=0, description="no experiment starts after this")


class InversePair(Strict):
    """Two metrics that must agree: a * b ~= product (e.g. tok/s * ms/tok = 1000)."""

    a: str = Field(description="a declared metric")
    b: str = Field(description="a declared metric")
    product: float = Field(gt=0, description="what a * b must be, e.g. 1000 for tok/s and ms/tok")
    tolerance: float = Field(0.1, gt=0, lt=1, description="relative")


class Sanity(Strict):
    """Cross-checks of the benchmark's own numbers (a parser reading the wrong line fails them)."""

    inverse_pairs: list[InversePair] = Field([], description="metric pairs whose product is fixed")


class RooflineSettings(Strict):
    """Model size and measured speed; bandwidth is measured on this machine when not given."""

    model_bytes: int = Field(gt=0, description="bytes read per token")
    tokens_per_s: float = Field(gt=0, description="the measured generation speed")
    bandwidth_gbs: float | None = Field(None, gt=0, description="memory bandwidth; default: measured")


class ProfileSettings(Strict):
    """A per-op profile of one benchmark process (research source, jobs/research/profile.py): the
    target is built with an instrumentation recipe and the benchmark runs once with `variable`
    naming the file the hook writes."""

    instrument: str = Field(pattern=r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*\.yml$",
                            description="recipe-format file under kernels/, e.g. llama/op-profile.yml")
    variable: str = Field("GGML_CPU_OP_PROFILE", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                          description="the environment variable naming the profile file")
    command: str | None = Field(None, description="the profiled process; default: the benchmark command")
    workloads: dict[str, int] = Field(default_factory=dict,
                                      description="metric -> tokens per graph; default ppN -> N, tgN -> 1")
    timeout: float = Field(1800, gt=0, description="seconds for the instrumented build and for the run")
    required: bool = Field(False, description="true: a run stops when the profile cannot be measured; false: "
                                              "it ranks without it and every report says so at the top")

    @field_validator("instrument")
    @classmethod
    def _inside_kernels(cls, value: str) -> str:
        if ".." in value.split("/"):
            raise ValueError(f"{value!r}: a path under kernels/ without '..'")
        return value


class ResearchSettings(Strict):
    """Where hypotheses come from besides the code itself."""

    recipes: list[str] = Field(default_factory=list, description="recipe sets under kernels/recipes")
    backends: list[str] = Field(default_factory=list, description="folders of other backends")
    forks: list[str] = Field(default_factory=list, description="owner/name of competing repos")
    fork_count: int = Field(5, ge=0, description="most-starred forks to compare")
    papers: list[str] = Field(default_factory=list, description="arXiv search queries")
    roofline: RooflineSettings | None = Field(None, description="memory-bound check of the primary metric")
    profile: ProfileSettings | None = Field(None, description="a per-op profile of one benchmark process")
    max_hypotheses: int = Field(8, ge=1, description="most hypotheses a run tries")


class Simulate(Strict):
    """A reduced workload run once per arm under Valgrind's cachegrind: its simulated cycles decide
    keeps on a noisy machine (jobs/measure/simulate.py; needs `valgrind`). The wall-clock pairs still run,
    as a guard against a real slowdown and for the integrity check."""

    command: str = Field(description="shell command of the reduced workload (seconds natively: cachegrind "
                                     "runs it ~20-100x slower)")
    timeout: float = Field(900, gt=0, description="seconds for one simulated run")
    min_effect_pct: float = Field(0.5, gt=0, description="the least fall in simulated cycles a keep needs "
                                                         "(raised past 3x the A/A jitter)")
    wall_tolerance_pct: float = Field(5.0, gt=0, description="a keep's wall-clock interval must exclude a "
                                                             "regression beyond this")
    profile_flags: str = Field("-O2 -g -fopt-info-vec-missed -fopt-info-vec-optimized",
                               description="CFLAGS/CXXFLAGS of the research build that is profiled under "
                                           "callgrind (file:line needs -g; the compiler's remarks need "
                                           "-fopt-info-vec-missed, and a loop versioned for possible aliasing "
                                           "-fopt-info-vec-optimized); '' profiles the build as it is")
    separate_build: bool = Field(False, description="true when the workload runs a build of its own, not the "
                                                  "benchmark's (e.g. an AVX2 copy on an AVX-512 machine, since "
                                                  "Valgrind has no AVX-512): a wall-clock win the simulation does "
                                                  "not see may then be on a path only the measured build runs, so "
                                                  "it is discarded as unseen instead of called invalid")


class Price(Strict):
    """USD per million tokens."""

    input: float = Field(ge=0, description="USD per million input tokens")
    output: float = Field(ge=0, description="USD per million output tokens")
    cache_write: float | None = Field(None, ge=0, description="USD per million cache-write tokens")
    cache_read: float | None = Field(None, ge=0, description="USD per million cache-read tokens")


class LLM(Strict):
    """The Claude agent's model and hard caps; spend counts into the run's cost."""

    model: str = Field("claude-sonnet-4-6", description="Anthropic model id")
    max_tokens: int = Field(4096, ge=256, description="per response")
    max_run_tokens: int = Field(2_000_000, ge=1000, description="per run")
    max_usd: float = Field(10.0, ge=0, description="model spend per run")
    max_turns: int = Field(30, ge=1, description="tool-use turns per hypothesis")
    max_retries: int = Field(2, ge=0, description="per API call")
    timeout: float = Field(120.0, gt=0, description="seconds per API call")
    pricing: dict[str, Price] = Field({}, description="model id -> prices, for models the built-in table lacks")


class Platform(Strict):
    """Where experiments run: `local`, or `x86`/`arm` VMs with --executor skypilot."""

    name: str = Field(description="local, x86, arm (or a name of your own with an instance_type)")
    instance_type: str | None = Field(None, description="cloud instance type; default c6i.2xlarge (x86), "
                                                        "c7g.2xlarge (arm)")
    cloud: str | None = Field(None, description="SkyPilot cloud; default aws")


class PullRequestSettings(Strict):
    """Where the run's branch is pushed and the draft PR opened from."""

    fork: str | None = Field(None, pattern=r"^[A-Za-z0-9-]+(/[A-Za-z0-9._-]+)?$",
                             description="owner or owner/name of a fork; default: the repository itself")


class TargetConfig(Strict):
    """`.github/autoresearch.yml`. Commands run with bash in the root of a clean checkout of the
    commit being measured (a git worktree), in the sandbox."""

    version: Literal[1] = Field(1, description="the file format's version")
    name: str = Field("", description="shown in reports; default: the repository's folder name")
    build: str = Field(description="shell command that builds the tree, run in its root")
    benchmark: str = Field(description="shell command, one process = one sample, a fixed amount of work (not "
                                       "a time budget); prints METRIC (and DIGEST) lines")
    checks: str = Field(description="shell command; exit 0 = outputs still correct")
    metrics: list[Metric] = Field(min_length=1, description="what the benchmark prints; one is primary")
    editable: list[str] = Field(min_length=1, description="globs (fnmatch, from the repository root) of the only "
                                                          "files an agent or a --candidate may change")
    yardstick: list[str] = Field(default_factory=list, description=(
        "globs of further files that measure or check (e.g. the sources the build compiles into the benchmark), "
        "added to the default yardstick: the config, the files the commands name, and the folders of the "
        "benchmark's and checks' files; none of it may be edited, and `editable` must not reach into it"))
    timeouts: Timeouts = Timeouts()
    repeats: Repeats = Repeats()
    thresholds: Thresholds = Thresholds()
    budget: Budget = Budget()
    sanity: Sanity = Sanity()
    integrity: Integrity = Integrity()
    sandbox: Sandbox = Sandbox()
    research: ResearchSettings = ResearchSettings()
    simulate: Simulate | None = Field(None, description=(
        "a deterministic yardstick (simulated cycles) of a reduced workload; left out, calibration derives one from "
        "the benchmark command where it fits in `timeouts.simulate`; `false`: none"))
    artifacts: list[str] = Field([], description="globs of the build's outputs; a candidate whose outputs "
                                                 "are byte-identical to the baseline's is not sampled")
    platforms: list[Platform] = Field(default_factory=lambda: [Platform(name="local")],
                                      description="short form [x86, arm] allowed")
    agent: Literal[tuple(agentkinds.names())] = Field(agentkinds.DEFAULT, description="who implements hypotheses")
    llm: LLM = LLM()
    pull_request: PullRequestSettings = PullRequestSettings()
    approvers: list[str] = Field([], description="GitHub logins who may approve spending besides writers")

    @model_validator(mode="before")
    @classmethod
    def _simulate_off(cls, data):
        # `simulate: false` is the plain way to say "no yardstick, not even a derived one"; it means
        # `timeouts.simulate: 0`, the one place the derived yardstick's budget lives.
        if isinstance(data, dict) and data.get("simulate") is False:
            timeouts = data.get("timeouts") or {}
            if not isinstance(timeouts, dict):
                return data          # the field's own validation says what is wrong with it
            data = {**data, "simulate": None, "timeouts": {**timeouts, "simulate": 0}}
        elif isinstance(data, dict) and data.get("simulate") is True:
            raise ValueError("simulate: true names no workload: give `simulate: {command: ...}` for a reduced "
                             "workload, leave it out to derive one from the benchmark command, or `false` for none")
        return data

    @field_validator("platforms", mode="before")
    @classmethod
    def _platform_names(cls, value):
        # Allow the short form `platforms: [x86, arm]`.
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _one_primary(self):
        primaries = [m.name for m in self.metrics if m.primary]
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError("metrics: each metric name must appear once")
        if len(primaries) != 1:
            raise ValueError(
                f"metrics: exactly one metric needs 'primary: true' (found {len(primaries)}: {primaries})"
            )
        for pair in self.sanity.inverse_pairs:
            for name in (pair.a, pair.b):
                if name not in names:
                    raise ValueError(f"sanity.inverse_pairs: {name!r} is not a declared metric")
        return self

    @property
    def primary(self) -> Metric:
        return next(m for m in self.metrics if m.primary)

    def metric(self, name: str) -> Metric:
        return next(m for m in self.metrics if m.name == name)

    def narrow(self, overrides: "Overrides") -> "TargetConfig":
        """This config with a command's arguments applied. They may only narrow it: a metric or
        platform the file does not name, or a budget above its cap, is an OverrideError (never a
        guess). `x86`, `arm` and `local` are known platforms even when the file lists others."""
        update: dict[str, Any] = {}
        if overrides.metric:
            names = [m.name for m in self.metrics]
            if overrides.metric not in names:
                raise OverrideError(f"metric={overrides.metric}: not a metric of this target (known: {', '.join(names)})")
            update["metrics"] = [m.model_copy(update={"primary": m.name == overrides.metric}) for m in self.metrics]
        if overrides.platforms:
            known = {p.name: p for p in self.platforms}
            unknown = [p for p in overrides.platforms if p not in known and p not in ("x86", "arm", "local")]
            if unknown:
                raise OverrideError(f"platforms={','.join(overrides.platforms)}: unknown {unknown} "
                                    f"(configured: {sorted(known)})")
            update["platforms"] = [known.get(p) or Platform(name=p) for p in overrides.platforms]
        if overrides.budget is not None:
            if overrides.budget > self.budget.usd:
                raise OverrideError(f"budget={overrides.budget:g}: above the repository's cap of {self.budget.usd:g} USD")
            update["budget"] = self.budget.model_copy(update={"usd": overrides.budget})
        return self.model_copy(update=update) if update else self


_FIXES = {
    "missing": "add it",
    "extra_forbidden": "remove it or check its spelling",
    "literal_error": "use one of the allowed values",
    "string_pattern_mismatch": "use letters, digits, '_', '.' only",
    "string_type": "write text (quote it when YAML reads it as a number, a boolean or null)",
    "int_parsing": "write a whole number, e.g. 3",
    "int_type": "write a whole number, e.g. 3",
    "int_from_float": "write a whole number, e.g. 3",
    "float_parsing": "write a number, e.g. 1.5",
    "float_type": "write a number, e.g. 1.5",
    "bool_parsing": "write true or false",
    "bool_type": "write true or false",
    "list_type": "write a list, e.g. [a, b], or one '- item' per line",
    "dict_type": "write a mapping, e.g. {key: value}",
    "model_type": "write a mapping of its fields, e.g. {name: value}",
    "model_attributes_type": "write a mapping of its fields, e.g. {name: value}",
    "too_short": "list at least one",
}
_BOUNDS = {"greater_than": "use a value above {gt}", "greater_than_equal": "use {ge} or more",
           "less_than": "use a value below {lt}", "less_than_equal": "use {le} or less"}
REFERENCE = "see `autoresearch config --example` for every field and its form"


def _fix(item: dict) -> str:
    """The 'fix:' of one validation error: every problem gets one (a value error raised by our own
    validators already says what is wrong; the reference shows what is right)."""
    if item["type"] in _BOUNDS:
        return _BOUNDS[item["type"]].format(**{k: f"{v:g}" if isinstance(v, (int, float)) else v
                                                for k, v in item.get("ctx", {}).items()})
    return _FIXES.get(item["type"], REFERENCE)


def _problems(error: ValidationError) -> list[tuple[str, str]]:
    out = []
    for item in error.errors():
        loc = ".".join(str(p) for p in item["loc"]) or "(top level)"
        msg = item["msg"].removeprefix("Value error, ")
        out.append((loc, f"{msg}; fix: {_fix(item)}"))
    return out


def parse_config(text: str, source: str = CONFIG_PATH) -> TargetConfig:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(unknown position)"
        raise ConfigError(source, [(where, f"not valid YAML: {getattr(exc, 'problem', exc)}; fix: correct the "
                                           "syntax there (indentation, an unclosed bracket or quote)")]) from None
    if not isinstance(data, dict):
        raise ConfigError(source, [("(top level)", f"must be a mapping of fields (build, benchmark, ...); fix: {REFERENCE}")])
    try:
        return TargetConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, _problems(exc)) from None


def load_config(repo: Path) -> TargetConfig:
    path = Path(repo) / CONFIG_PATH
    if not path.is_file():
        raise ConfigError(str(path), [("(file)", f"not found; create {CONFIG_PATH} in the target repository")])
    from jobs.guard import safefs  # the repository's file: never read through a link, nor unbounded
    try:
        text = safefs.read_text(repo, CONFIG_PATH, safefs.CONFIG_LIMIT)
    except safefs.UnsafeFile as exc:
        raise ConfigError(str(path), [("(file)", f"{exc}; fix: commit the config itself there")]) from None
    return parse_config(text, source=str(path))
