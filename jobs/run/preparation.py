"""Preparing a run of the bot: on a clone at `base`, collect the candidates, research once
(offline: deterministic and free, nothing is spent before approval) and plan.

- `make_plan(config, n, executor)`: the plan, priced with the shipped SkyPilot catalog.
- `prepare(layout, base, config, executor)`: the `Preparation`, saved to `prepared.json`, so the
  run, perhaps in another process, hands that research and that narrowed config to the pipeline
  (`jobs.api.start(prep)`) instead of scanning and narrowing again; `load_preparation` reads it back.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from jobs.contract import branches, ledger
from jobs.guard import safefs
from jobs.executors.cloud import catalog
from jobs.executors.registry import EXECUTORS
from jobs.contract.agentkinds import researches
from jobs.contract.config import ConfigError, TargetConfig, load_config
from jobs.contract.errors import RunError
from jobs.contract.layout import RunLayout
from jobs.contract.model import Hypothesis
from jobs.contract.plan import CostPlan
from jobs.contract.plan import make_plan as _make_plan
from jobs.research.recipes import Detection, RecipeError, load_recipe_set
from jobs.research.offline import Research, research
from jobs.research.passes import Finding, Pass

CANDIDATES_DIR = ".github/autoresearch/candidates"
PREPARED_VERSION = 1


class PlanError(RunError):
    """The plan cannot be made (e.g. an instance type without a price)."""


def make_plan(config: TargetConfig, n_hypotheses: int, executor: str) -> CostPlan:
    """`jobs.contract.plan.make_plan` with the shipped catalog's prices."""
    try:
        kind = EXECUTORS.get(executor)       # an unknown name is priced as a cloud one, and fails there
        return _make_plan(config, n_hypotheses, cloud=kind is None or kind.is_cloud, hourly_usd=catalog.hourly_price)
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
    plan: CostPlan

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
            _check_name(name)
            data = safefs.read_bytes(layout.clone, f"{CANDIDATES_DIR}/{name}", safefs.PATCH_LIMIT)
            (layout.candidates / name).write_bytes(data)
            candidates.append(layout.candidates / name)
    except OSError as exc:
        raise PlanError(f"the candidate patches in {CANDIDATES_DIR} cannot be used: {exc.strerror or exc}; fix: "
                        "commit each patch there as a regular file (no links)") from None
    found = research(layout.clone, config) if researches(config.agent) else None
    n = len(found.hypotheses) if found else 0
    prep = Preparation(layout, base, config, found, candidates, make_plan(config, n + len(candidates), executor))
    data = {"version": PREPARED_VERSION, "base": base, "config": config.model_dump(mode="json"),
            "candidates": [c.name for c in candidates], "research": _research_data(found) if found else None}
    ledger.write_atomic(layout.prepared, json.dumps(data, sort_keys=True))   # never half a preparation
    return prep


def _check_name(name: str) -> None:
    """A candidate's file name names its experiment and so a git branch: refused before any work."""
    why = branches.candidate_problem(name, Path(name).stem)
    if why:
        raise PlanError(f"{why} (in {CANDIDATES_DIR})")


def candidates_in_repo(prep: Preparation) -> tuple[str, ...]:
    """The candidates of a run `prepare` made, as paths inside the repository: it copies each from
    CANDIDATES_DIR under its own name (a report names them where a maintainer finds them)."""
    return tuple(f"{CANDIDATES_DIR}/{c.name}" for c in prep.candidates)


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
        if any(n != Path(n).name or not n.endswith(".patch") or branches.candidate_problem(n, Path(n).stem)
               for n in names):
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
        h.patch = None      # the planning scan makes no patches (the run's research phase writes its own); candidates come from `candidates/`
    findings = [Finding(**{**f, "passes": [Pass(**{**p, "writes": set(p["writes"]), "reads": set(p["reads"])})
                                           for p in f["passes"]]}) for f in data["findings"]]
    recipes = {r.id: r for name in config.research.recipes for r in load_recipe_set(name)}
    return Research(hypotheses, findings, [Detection(**d) for d in data["detections"]], recipes,
                    [str(n) for n in data["notes"]])


def prepare_candidates(layout: RunLayout, base: str, candidates: list[Path], executor: str) -> Preparation:
    """A run of given patches alone (a pull request's `/autoresearch bench`): no research, the clone's
    own config (read here, once; no command narrows it)."""
    for c in candidates:
        _check_name(Path(c).name)
    config = load_config(layout.clone)
    return Preparation(layout, base, config, None, list(candidates), make_plan(config, len(candidates), executor))
