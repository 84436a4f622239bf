"""The research phase of a run: offline scan (or the one the bot's plan already made), C-library
gap scan and callgrind profile, the research sources (op profile, forks, papers), a model's
ranking when the agent is one; written to research.md and hypotheses.json, and saved in the
run's state so a resume does not research again.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from jobs.guard import gitops
from jobs.contract import events
from jobs.contract.agentkinds import researches
from jobs.contract.config import TargetConfig
from jobs.contract.errors import RunError
from jobs.contract.model import Hypothesis
from jobs.report.report import finding_line, render_research, with_warning
from jobs.research.offline import Research, candidate_hypothesis, research
from jobs.measure.isolation import Isolation
from jobs.measure.runner import run_step
from jobs.contract.runstate import RunState


@dataclass
class Researching:
    repo: Path
    out: Path
    config: TargetConfig
    state: RunState
    emit: Callable[[events.Event], None]
    isolation: Isolation                   # the op and callgrind profiles run target code: in the run's sandbox
    agent_name: str                        # offline | none | claude
    agent: Callable[[], Any]               # the agent, made when first asked for
    charge_llm: Callable[[], None]         # the model's spend so far, added to the run's cost
    candidates: list[Path]
    prepared: Research | None = None       # the offline research the bot's plan already made on this commit
    profile: str = "reuse"                 # reuse | fresh | off (RunOptions.profile)

    def run(self) -> list[Hypothesis]:
        if self.state.hypotheses is not None:
            return copy.deepcopy(self.state.hypotheses)
        self.emit(events.Phase("research"))
        tree = self.out / "work" / "research"
        gitops.add_worktree(self.repo, tree, self.state.base_commit)
        try:
            hypotheses: list[Hypothesis] = [candidate_hypothesis(Path(p)) for p in self.candidates]
            found = None
            if researches(self.agent_name):
                self._step("scan (recipes, memory passes)")
                found = self.prepared if self.prepared is not None else research(tree, self.config)
            sources = callprof = None
            if found:
                found, sources, callprof = self._sources(tree, found)
                hypotheses += found.hypotheses
            notes = found.notes if found else ["--agent none: only the given candidates are evaluated"]
            findings = [finding_line(f.where, f.describe()) for f in (found.findings if found else [])]
            from jobs.research.callgrind import render as render_callgrind
            from jobs.research.clib import scanned
            coverage = scanned(tree, self.config, sources_ran=found is not None, findings=len(findings),
                               candidates=len(self.candidates), prof=callprof, hypotheses=len(hypotheses))
        finally:
            gitops.remove_worktree(self.repo, tree)
        self.charge_llm()
        from jobs.guard.mdsafe import document  # every section Markdown, or a TypeError here
        (self.out / "research.md").write_text(document([with_warning(render_research(
            self.config.name or self.repo.name, self.state.base_commit, hypotheses, notes, findings,
            self.agent_name, off_path=found.off_path if found else ()), self.state.profile_missing), *coverage,
            *(render_callgrind(callprof) if callprof else []), *([sources.markdown()] if sources else [])]),
            encoding="utf-8")
        (self.out / "hypotheses.json").write_text(
            json.dumps([h.to_dict() for h in hypotheses], indent=2), encoding="utf-8")
        profile = sources.profile.to_dict() if sources is not None and sources.profile is not None else None
        self.state.save(hypotheses=hypotheses, phase="calibrate", profile=profile,
                        callgrind=callprof)
        self.emit(events.ResearchDone(tuple(h.id for h in hypotheses)))
        return hypotheses

    def _sources(self, tree: Path, found: Research):
        """Gap scan; forks/papers when configured; the profiles: (the research with what they
        found merged in, the sources gathered, the callgrind profile or None)."""
        from jobs.research.clib import research_c
        from jobs.research.offline import merge_sources, model_research
        from jobs.research.sources import gather
        config, cache = self._profile_choice()
        from jobs.measure.simulate import tried
        profiled = tried(self.config)        # no `simulate:`: the benchmark command itself, if it fits
        derived = profiled is not self.config
        if profiled.simulate is not None:
            self._step("callgrind profile (" + ("the benchmark command: no simulate: workload" if derived else
                                                 "simulate: workload") + ")")
        cache = None
        if profiled.simulate is not None and self.profile != "fresh":   # `--profile fresh` measures again
            from jobs.research.callgrind import cache_file
            cache = cache_file(self._profiles_dir(), self.state.base_commit, profiled, self.state.bench_env_digest)
        extra, cnotes, callprof = research_c(tree, profiled, self.out / "patches", lambda c, cwd, timeout, **kw:
                                             run_step(c, cwd, timeout, isolation=self.isolation, **kw),
                                             derived=derived, cache=cache)
        if callprof is not None:      # the hot code itself: each rewrite of the catalogue built and checked
            from jobs.agent.transforms.check import transform_hypotheses
            changed, tnotes = transform_hypotheses(tree, callprof, list(profiled.editable), self.out / "patches",
                                                   lambda c, cwd, timeout, **kw: run_step(
                                                       c, cwd, timeout, isolation=self.isolation, **kw),
                                                   profiled.build, profiled.timeouts.build)
            extra += changed
            cnotes += tnotes
        found.hypotheses += extra
        found.notes += cnotes
        sources = gather(tree, config, profile_runner=lambda command, cwd, timeout: run_step(
            command, cwd, timeout, isolation=self.isolation, step="build"), on_step=self._step,
            profile_cache=cache)
        if config is not self.config:
            sources.notes.append("profile: not measured (switched off with --profile off)")
        elif sources.profile_missing:
            self._profile_missing(sources.profile_missing)
        agent = self.agent()
        found = merge_sources(found, sources, self.config, callprof,   # ranked by measured cost when profiled
                              leads_take_slots=agent.implements_leads)
        if callprof is not None:
            from jobs.research.callgrind import digest
            sources.extra_digests["callgrind profile of the simulated workload (simulated cycles)"] = digest(callprof)
            if agent.reads_profile:
                agent.profile_digest = digest(callprof)
        if agent.ranks_from_digests:             # a model researcher ranks from the digests
            found.hypotheses, extra = model_research(agent, found, sources)
            found.notes += extra
        return found, sources, callprof

    def _profile_missing(self, why: str) -> None:
        """The op profile was configured but not measured: stop (research.profile.required) or go on
        ranking by kind weights alone, saying so loudly, since the ranking decides what is tested."""
        spec = self.config.research.profile
        fix = (f"raise research.profile.timeout (now {spec.timeout:.0f} s), warm the build's cache (ccache) "
               "or fix the instrumented build, then run again (`--profile reuse` keeps a measured profile)")
        if spec.required:
            raise RunError(f"research.profile: the op profile was not measured ({why}); research.profile.required "
                           f"is true, so the run stops before anything is measured; fix: {fix}")
        message = (f"the op profile was not measured ({why}): hypotheses are ranked by kind weights alone, so the "
                   f"ones a profile would put first may not be tested; fix: {fix}, or set "
                   "research.profile.required: true to stop instead")
        self.state.save(profile_missing=message)
        self.emit(events.RunWarning(message))

    def _step(self, name: str) -> None:
        self.emit(events.StepProgress("research", name, 0.0))

    def _profiles_dir(self) -> Path:
        """Where profiles of this repository's commits are kept (in its git directory, beside no tree)."""
        git_dir = Path(gitops.git(self.repo, "rev-parse", "--path-format=absolute", "--git-common-dir"))
        return git_dir / "autoresearch" / "profiles"

    def _profile_choice(self) -> tuple[TargetConfig, Path | None]:
        """The config the research sources see and where the op profile is kept (`--profile`)."""
        spec = self.config.research.profile
        if spec is None:
            return self.config, None
        if self.profile == "off":
            return self.config.model_copy(update={"research": self.config.research.model_copy(
                update={"profile": None})}), None
        from jobs.research.profile_run import cache_file
        from jobs.research.sources import KERNELS_DIR
        recipe = KERNELS_DIR / spec.instrument
        cache = cache_file(
            self._profiles_dir(), self.state.base_commit, spec.model_dump_json(),
            recipe.read_text(encoding="utf-8") if recipe.is_file() else "", self.config.build, self.config.benchmark,
            self.state.bench_env_digest)
        if self.profile == "fresh":
            cache.unlink(missing_ok=True)
        return self.config, cache
