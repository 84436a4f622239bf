"""Gather the research sources for one tree: gap scan, forks, papers, roofline.

The gap scan is offline and always runs. Forks and papers reach the network only when the repo
config names them (`research.forks`, `research.papers`); the GitHub token is read here, handed to
githubkit only, and never appears in a digest. API base URLs follow `GITHUB_API_URL` (set by
GitHub Actions) and `AUTORESEARCH_ARXIV_URL`, so tests point them at fakes on loopback. The
roofline needs the model size and a measured tokens/s: it runs when the config supplies them
(`research.roofline`), measuring this machine's bandwidth when none is given. The op profile
(`research.profile`) builds an instrumented copy of the research worktree and runs one
benchmark process (jobs/research/profile.py); a failure becomes a note, never a failed run.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.guard import gitops
from jobs.contract.config import TargetConfig
from jobs.guard.mdsafe import Markdown, document, md, spans
from . import forks as forks_mod
from . import gapscan, papers as papers_mod, profile as profile_mod, profile_run
from .roofline import Roofline, measure_bandwidth, roofline


@dataclass
class Sources:
    gaps: gapscan.GapScan | None = None
    leads: list[forks_mod.Lead] = field(default_factory=list)
    papers: list[papers_mod.Paper] = field(default_factory=list)
    roofline: Roofline | None = None
    profile: profile_mod.Profile | None = None
    # op sequence label -> the sequences it stands for; filled by offline.merge_sources with the
    # hypotheses' sequences so the profile table shows what each one could gain
    profile_sequences: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    profile_missing: str = ""          # the op profile was configured but not measured: why
    notes: list[str] = field(default_factory=list)
    extra_digests: dict[str, str] = field(default_factory=dict)   # e.g. the callgrind profile (jobs/research/clib.py)

    def markdown(self) -> Markdown:
        """research.md's sections of the sources, each section `Markdown` (`mdsafe.document`)."""
        out: list[Markdown] = []
        if self.roofline:
            out += [md("## Roofline"), md(""), md("{}", self.roofline.summary()), md("")]
        if self.profile:
            out += profile_mod.render(self.profile, self.profile_sequences)
        if self.gaps:
            out += gapscan.render(self.gaps)
        out += forks_mod.render(self.leads, [])
        out += papers_mod.render(self.papers, [])
        if self.notes:
            out += [md("## Source notes"), md(""), *[md("- {}", spans(n)) for n in self.notes], md("")]
        return document(out)

    def digests(self) -> dict[str, str]:
        """Plain-text digests for a model researcher (all of it is treated as untrusted data)."""
        d: dict[str, str] = {}
        if self.roofline:
            d["roofline"] = self.roofline.summary()
        if self.profile:
            d["op profile (share of each workload's time; Amdahl bounds)"] = profile_mod.digest(
                self.profile, self.profile_sequences)
        if self.gaps and self.gaps.cpu_dir:
            lines = ["CPU fuses: " + ", ".join(f"{'+'.join(s.ops)} at {s.where}"
                                              for s in self.gaps.fused.get(gapscan.CPU, []))]
            for g in self.gaps.gaps:
                ev = "; ".join(f"{w} ({n})" for w, n in g.evidence())
                lines.append(f"{g.name} fused by {', '.join(sorted(g.backends))}, not CPU: {ev}")
            d["cross-backend fusion gaps"] = "\n".join(lines)
        if self.leads:
            d["forks and competing repositories"] = "\n\n".join(lead.digest() for lead in self.leads)
        if self.papers:
            d["papers"] = "\n\n".join(p.digest() for p in self.papers)
        d.update(self.extra_digests)
        return d


def _upstream(tree: Path) -> str | None:
    url = gitops.git(tree, "remote", "get-url", "origin", check=False) if (Path(tree) / ".git").exists() else ""
    return forks_mod.upstream_from_remote(url) if url else None


def _roofline(config: TargetConfig, notes: list[str]) -> Roofline | None:
    spec: Any = getattr(config.research, "roofline", None)
    if not spec:
        return None
    get = (lambda k: getattr(spec, k, None) if not isinstance(spec, dict) else spec.get(k))
    model_bytes, tps, bw = get("model_bytes"), get("tokens_per_s"), get("bandwidth_gbs")
    if not model_bytes or not tps:
        notes.append("roofline: needs research.roofline.model_bytes and tokens_per_s")
        return None
    if not bw:
        bw = measure_bandwidth()
        notes.append(f"roofline: bandwidth measured on this machine ({bw:.1f} GB/s copy)")
    return roofline(float(model_bytes), float(tps), float(bw))


KERNELS_DIR = Path(__file__).resolve().parents[2] / "kernels"


def _profile(tree: Path, config: TargetConfig, notes: list[str], run=None, on_step=None,
             cache: Path | None = None) -> profile_mod.Profile | None:
    """The op profile of one benchmark process, or None with a note saying why not. Runs last:
    it edits the (throw-away) research worktree."""
    spec = getattr(config.research, "profile", None)
    if spec is None:
        return None
    from jobs.research.recipes import RecipeError, load_recipe
    from jobs.measure.runner import cpu_model
    path = (KERNELS_DIR / spec.instrument).resolve()
    if not path.is_file() or KERNELS_DIR.resolve() not in path.parents:
        notes.append(f"profile: instrumentation kernels/{spec.instrument} not found")
        return None
    try:
        instrument = load_recipe(path)
        prof = profile_run.measure(
            tree, instrument, build=config.build, command=spec.command or config.benchmark,
            variable=spec.variable, metric_names=[m.name for m in config.metrics], explicit=spec.workloads,
            build_timeout=spec.timeout, run_timeout=spec.timeout, run=run, on_step=on_step, cache=cache)
    except (RecipeError, profile_mod.ProfileError) as exc:
        notes.append(f"profile: not measured ({exc})")
        return None
    prof.cpu = cpu_model()
    return prof


def gather(tree: Path, config: TargetConfig, *, upstream: str | None = None, github: Any = None,
           arxiv_base: str | None = None, arxiv_pause: float = 3.0, profile_runner=None, on_step=None,
           profile_cache: Path | None = None) -> Sources:
    """Every configured source. `profile_runner` runs the profile's build and benchmark commands
    (default jobs.measure.runner.run_step; a sandboxing runner goes here); `on_step(name)` hears each
    sub-step as it starts; `profile_cache` is where the op profile is reused from and kept."""
    on_step = on_step or (lambda name: None)
    tree = Path(tree)
    src = Sources()
    on_step("gap scan (other backends)")
    src.gaps = gapscan.scan_tree(tree, list(config.research.backends))
    if src.gaps.cpu_dir is None:
        src.gaps = None
    src.roofline = _roofline(config, src.notes)
    r = config.research
    upstream = upstream or _upstream(tree)
    if r.forks or (getattr(r, "fork_count", 0) and upstream):   # nothing configured and no GitHub origin: no note
        on_step("forks (GitHub)")
        try:
            gh = github or forks_mod.make_github(os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN"),
                                                 base_url=os.environ.get("GITHUB_API_URL") or None)
        except ImportError:
            src.notes.append("forks: githubkit is not installed (pip install 'autoresearch[bot]')")
        else:
            leads, notes = forks_mod.research_forks(gh, upstream, list(r.forks), list(config.editable),
                                                    max_forks=getattr(r, "fork_count", 0) or 5)
            src.leads, src.notes = leads, src.notes + notes
    if r.papers:
        on_step("papers (arXiv)")
        base = arxiv_base or os.environ.get("AUTORESEARCH_ARXIV_URL") or papers_mod.ARXIV
        found, notes = papers_mod.search(list(r.papers), base=base, pause=arxiv_pause)
        src.papers, src.notes = found, src.notes + notes
    before = len(src.notes)
    src.profile = _profile(tree, config, src.notes, profile_runner, on_step, profile_cache)
    if getattr(config.research, "profile", None) is not None and src.profile is None:
        src.profile_missing = "; ".join(n.removeprefix("profile: ") for n in src.notes[before:]) or "not measured"
    return src
