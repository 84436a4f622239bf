"""`autoresearch run TARGET --executor skypilot --dry-run`: the tasks and the estimate, nothing launched.

Prints, per cloud platform, the SkyPilot task YAML of the calibration (A/A), of an experiment
(one per hypothesis; only its name and candidate commit differ) and of the stack measurement,
each validated by SkyPilot itself (offline, against the shipped catalog), then the plan's
estimate and the worst case the budget check reserves. No VM is started, no commit is made:
hypotheses are counted by the same offline scan the research phase runs (on the working tree).

A front of `jobs/` (beside `jobs.cli` and `jobs.api`): it sits above the pipeline and the cloud
modules it previews, so nothing below imports it.
"""
from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

from jobs.guard import gitops
from jobs.executors.cloud import catalog, tasks
from jobs.contract.agentkinds import researches
from jobs.contract.config import TargetConfig, load_config
from jobs.contract.errors import RunError
from jobs.contract.plan import DEFAULT_INSTANCE, make_plan
from jobs.contract.spec import ExperimentSpec
from jobs.executors.registry import EXECUTORS

PLACEHOLDER_COMMIT = "0" * 40


def _count_hypotheses(repo: Path, config: TargetConfig, agent: str, candidates: int) -> tuple[int, list[str]]:
    names: list[str] = []
    if researches(agent):
        from jobs.research.offline import research
        names = [h.id for h in research(repo, config).hypotheses]
    return min(candidates + len(names), config.budget.max_experiments), names


def dry_run(options, *, sky=None) -> str:
    """The preview as text (YAML documents with `#` comments)."""
    chosen = EXECUTORS.get(options.executor)
    if chosen is None or not chosen.is_cloud:
        raise RunError("--dry-run previews cloud tasks and their cost; use it with --executor skypilot")
    from jobs.executors.skypilot import CloudOptions, platforms_for, worst_case_seconds  # needs the cloud extra
    catalog.use_offline_catalog()           # validation only: never download SkyPilot's catalog here
    if sky is None:
        try:
            import sky
        except ImportError as exc:
            raise RunError(f"--executor skypilot needs the cloud extra (pip install 'autoresearch[cloud]'): {exc}")
    repo = gitops.toplevel(options.target)
    if repo is None:
        raise RunError(f"{options.target} is not a git repository")
    config = options.config if options.config is not None else load_config(repo)
    base = gitops.head_commit(repo)
    platforms = platforms_for(config)
    config = config.model_copy(update={"platforms": platforms})
    cloud = CloudOptions.from_env()
    n, names = _count_hypotheses(repo, config, options.agent, len(options.candidates))
    repeats = options.repeats or config.repeats.max

    lines = [f"# autoresearch dry run: {config.name or repo.name} at {base[:12]}, run {options.run_id}",
             f"# nothing is launched. Tasks validated by SkyPilot {getattr(sky, '__version__', '?')} "
             f"(offline, shipped catalog). Each task's workdir is staged per experiment under",
             f"# {options.out}/work/<platform>/ with repo.bundle (base + candidate commits), jobs/, spec.json.",
             f"# {n} hypothesis(es){': ' + ', '.join(names[:8]) if names else ''}"
             f"{' + ' + str(len(options.candidates)) + ' candidate patch(es)' if options.candidates else ''}"]
    worst: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="autoresearch-dry-run-") as tmp:
        for platform in platforms:
            instance_type = platform.instance_type or tasks_default(platform.name)
            try:
                price = catalog.hourly_price(instance_type, spot=cloud.use_spot)
            except catalog.CatalogError as exc:
                raise RunError(f"platform {platform.name}: {exc}") from None
            lines += ["", f"# ===== {platform.name}: {instance_type} on {platform.cloud or 'aws'}, "
                          f"{price:g} USD/h ({'spot' if cloud.use_spot else 'on-demand'}, shipped catalog)"]
            specs = {
                "calibration": _spec(config, options, platform.name, "calibration", base, base,
                                     config.repeats.calibration, "calibration"),
                "experiment": _spec(config, options, platform.name, names[0] if names else "experiment", base,
                                    PLACEHOLDER_COMMIT, repeats, "experiment"),
                "stack": _spec(config, options, platform.name, "stack", base, PLACEHOLDER_COMMIT, repeats, "stack"),
            }
            worst[platform.name] = {}
            for kind, spec in specs.items():
                stage = tasks.stage_workdir(spec, None, Path(tmp) / f"{platform.name}-{kind}")
                config_dict = tasks.task_config(spec, workdir=stage, instance_type=instance_type,
                                                cloud=platform.cloud or "aws", use_spot=cloud.use_spot,
                                                idle_minutes=cloud.idle_minutes)
                sky.Task.from_yaml_config(copy.deepcopy(config_dict))   # it consumes the dict
                seconds = worst_case_seconds(spec, cloud)
                worst[platform.name][kind] = seconds / 3600 * price
                what = {"calibration": "calibration (A/A: the baseline against itself)",
                        "experiment": f"experiment (one per hypothesis, {repeats} invocations per arm; "
                                      "head = the hypothesis's commit)",
                        "stack": "stack (the kept optimizations together, re-measured)"}[kind]
                lines += ["---", f"# {platform.name} {what}",
                          f"# worst case {seconds / 60:.0f} min = {worst[platform.name][kind]:.2f} USD "
                          "(reserved against the budget before launch)",
                          tasks.to_yaml(config_dict).rstrip()]
    lines += ["---", _estimate(config, n, worst)]
    return "\n".join(lines) + "\n"


def tasks_default(name: str) -> str:
    if name not in DEFAULT_INSTANCE:
        raise RunError(f"platform {name!r}: set its instance_type in .github/autoresearch.yml "
                       f"(defaults exist only for {', '.join(DEFAULT_INSTANCE)})")
    return DEFAULT_INSTANCE[name]


def _spec(config, options, platform: str, name: str, base: str, head: str, n: int, kind: str) -> ExperimentSpec:
    return ExperimentSpec.from_config(config, run_id=options.run_id, name=name, platform=platform,
                                      base_commit=base, head_commit=head, n_per_arm=n, kind=kind)


def _estimate(config: TargetConfig, n: int, worst: dict[str, dict[str, Any]]) -> str:
    plan = make_plan(config, n, cloud=True, hourly_usd=catalog.hourly_price)
    total = sum(w["calibration"] + n * w["experiment"] + w["stack"] for w in worst.values())
    per = "; ".join(f"{p}: {w['calibration']:.2f} + {n} x {w['experiment']:.2f} + {w['stack']:.2f}"
                    for p, w in worst.items())
    verdict = ("within the budget" if total <= config.budget.usd else
               "above the budget: the run stops launching when the next VM's worst case would pass it "
               "(real VM time is usually far below the worst case, so most experiments still run)")
    return "\n".join([
        "# ===== estimate",
        f"# plan: {plan.describe()}",
        f"# worst case (every step at its time limit, calibration + {n} experiment(s) + stack per platform): "
        f"{per} = {total:.2f} USD, {verdict}",
        f"# budget: {config.budget.usd:g} USD, up to {config.budget.max_vms} VM(s) per platform at once",
    ])
