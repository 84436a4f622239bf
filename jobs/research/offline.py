"""The offline researcher: pass-fusion scan + recipe detection -> ranked hypotheses.

Deterministic and free. Each hypothesis cites file:line evidence in the target tree; a recipe
that finds its optimization already present is reported as such and never becomes a patch.
"""
from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path

from jobs.guard import safefs
from jobs.contract.config import TargetConfig
from jobs.contract.model import Evidence, Hypothesis
from jobs.research.recipes import Detection, Recipe, detect, load_recipe_set, matches_any
from .passes import Finding, scan_source

SOURCE_SUFFIXES = {".c", ".h", ".cc", ".cpp", ".cxx", ".hpp"}
# Fusions remove whole memory passes (the lever when code is memory-bound); parallelism
# changes help when a phase leaves cores idle; micro-tuning is usually noise. Rank accordingly.
KIND_WEIGHT = {"fusion": 3.0, "parallelism": 2.0, "micro": 0.5}


@dataclass
class Research:
    hypotheses: list[Hypothesis]
    findings: list[Finding] = field(default_factory=list)
    detections: list[Detection] = field(default_factory=list)
    recipes: dict[str, Recipe] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # with a callgrind profile: hypotheses whose code the profiled workload never ran, with why (not ranked)
    off_path: list[tuple[Hypothesis, str]] = field(default_factory=list)


def editable_sources(tree: Path, config: TargetConfig) -> list[Path]:
    out = []
    for rel in sorted(safefs.walk_files(tree), key=Path):   # regular files only: a link is never read through
        path = Path(tree) / rel
        if path.suffix in SOURCE_SUFFIXES and matches_any(rel, config.editable):
            out.append(path)
    return out


def _line_of(where: str) -> tuple[str, int]:
    file, _, rest = where.partition(":")
    digits = rest.split(":", 1)[0]
    return file, int(digits) if digits.isdigit() else 0


def _overlaps(finding: Finding, evidence: list[str]) -> bool:
    for item in evidence:
        file, line = _line_of(item)
        if file == finding.file and finding.start - 3 <= line <= finding.end + 3:
            return True
    return False


def run_arches(platforms, local_arch: str) -> set[str] | None:
    """The machines (uname -m) this run's experiments build for: `local` is the machine research
    runs on (the worker that runs them); a cloud platform's is its instance type's (configured or
    the default, jobs.contract.plan.instance_type_for) in the shipped catalog. None when one is unknown."""
    from jobs.executors.cloud.catalog import CatalogError, lookup
    from jobs.contract.plan import instance_type_for
    arches = set()
    for p in platforms:
        if p.name == "local":
            arches.add(local_arch)
            continue
        try:
            arch = lookup(instance_type_for(p)).arch
        except CatalogError:
            return None
        arches.add("aarch64" if arch == "arm64" else arch)   # the catalog says arm64, uname -m aarch64
    return arches


def other_arch(recipe: Recipe, arches: set[str] | None) -> str:
    """Why `recipe` cannot change this run's builds ("" when it can): its code compiles only for
    machines none of the run's experiments build for (a change inside arch/arm/ is no code at all
    on x86-64, so measuring it there would spend an experiment on a certain no-op)."""
    if not recipe.arches or arches is None or arches & set(recipe.arches):
        return ""
    return (f"its code compiles only for {' and '.join(recipe.arches)} builds, and this run's experiments "
            f"build for {' and '.join(sorted(arches))}")


def research(tree: Path, config: TargetConfig, local_arch: str | None = None) -> Research:
    """Recipe detections and scan findings in `tree`, ranked. `local_arch` (default: this machine's
    `uname -m`) is what the `local` platform builds for."""
    tree = Path(tree)
    arches = run_arches(config.platforms, local_arch or platform.machine())
    findings: list[Finding] = []
    for path in editable_sources(tree, config):
        rel = path.relative_to(tree).as_posix()
        try:
            text = safefs.read_text(tree, rel, safefs.TEXT_LIMIT, errors="replace")
        except OSError:
            continue                                  # swapped for a link, or too large to scan
        findings += scan_source(rel, text)

    recipes: dict[str, Recipe] = {}
    for name in config.research.recipes:
        for recipe in load_recipe_set(name):
            recipes[recipe.id] = recipe
    detections = []
    for r in recipes.values():
        elsewhere = other_arch(r, arches)
        detections.append(Detection(r.id, "not_found", reason=elsewhere) if elsewhere else detect(r, tree))

    hypotheses: list[Hypothesis] = []
    claimed: set[int] = set()
    for det in detections:
        if det.status != "applicable":
            continue
        recipe = recipes[det.recipe]
        evidence = [Evidence(e.split(": ", 1)[0], e.split(": ", 1)[1] if ": " in e else "recipe probe")
                    for e in det.evidence]
        passes = 0
        for idx, finding in enumerate(findings):
            if _overlaps(finding, det.evidence):
                claimed.add(idx)
                passes = max(passes, len(finding.passes))
                evidence.append(Evidence(finding.where, finding.describe()))
        score = KIND_WEIGHT[recipe.kind] + 0.5 * passes
        hypotheses.append(Hypothesis(
            id=recipe.id, title=recipe.title, kind=recipe.kind, rationale=recipe.why.strip(),
            expected=recipe.expected.strip(), ops=list(recipe.ops), evidence=evidence,
            score=score, recipe=recipe.id))

    hypotheses += [finding_hypothesis(f) for idx, f in enumerate(findings) if idx not in claimed]

    hypotheses.sort(key=lambda h: (-h.score, h.id))
    notes = [f"{d.recipe}: already present ({', '.join(d.evidence)})" for d in detections
             if d.status == "already_present"]
    notes += [f"{d.recipe}: not applicable ({d.reason})" for d in detections if d.status == "not_found"]
    return Research(hypotheses[: config.research.max_hypotheses], findings, detections, recipes, notes)


def finding_hypothesis(finding: Finding) -> Hypothesis:
    """A memory-pass finding no recipe claims, as a fusion hypothesis."""
    return Hypothesis(
        id=f"fuse-{finding.function}-{finding.start}",
        title=f"Fuse {len(finding.passes)} passes over `{finding.buffer}` in {finding.function}()",
        kind="fusion", rationale=finding.describe() + "; each pass streams the buffer through memory again.",
        expected="fewer memory passes; matters when the buffer is large or the code is memory-bound",
        evidence=[Evidence(finding.where, finding.describe())],
        score=KIND_WEIGHT["fusion"] * 0.5 + 0.25 * len(finding.passes), recipe=None)


def candidate_hypothesis(patch: Path) -> Hypothesis:
    """A maintainer's own patch, evaluated with the same rigour; named after the file's stem."""
    return Hypothesis(id=patch.stem, title=f"Maintainer candidate {patch.name}", kind="candidate",
                      rationale="supplied with --candidate", evidence=[Evidence(str(patch), "patch file")],
                      score=100.0, patch=str(patch.resolve()))


# -- research sources (gap scan, forks, papers, roofline) merged into the ranked list ----------
GAP_HYPOTHESES = 6     # cross-backend gaps turned into hypotheses (all of them are listed in research.md)


def gap_hypothesis(gap) -> Hypothesis:
    backends = sorted(gap.backends)
    ops = "+".join(gap.ops)
    extends = (f" The CPU already fuses {'+'.join(gap.extends.ops)} ({gap.extends.where}); this extends it."
               if gap.extends else "")
    from .gapscan import expected_effect
    return Hypothesis(
        id="gap-" + "-".join(op.lower().replace("_", "") for op in gap.ops)[:60],
        title=f"Fuse {ops} on the CPU backend (fused by {', '.join(backends)})",
        kind="fusion",
        rationale=(f"{', '.join(backends)} {'fuses' if len(backends) == 1 else 'fuse'} the node sequence {ops} into one kernel; the CPU backend runs "
                   f"it as {len(gap.ops)} separate ops.{extends}"),
        expected=expected_effect(gap), ops=list(gap.ops),
        evidence=[Evidence(where, note) for where, note in gap.evidence()], score=gap.score, recipe=None)


def merge_sources(found: Research, sources, config: TargetConfig, callprof=None, leads_take_slots: bool = True,
                  ) -> Research:
    """The offline hypotheses plus the best cross-backend gaps, re-weighted by the roofline verdict,
    ranked and cut to `research.max_hypotheses`. A gap whose op sequence a hypothesis already
    covers (same ops, e.g. a recipe) adds its evidence there instead of a duplicate. With a callgrind
    profile (`callprof`), every hypothesis, the scan's findings the scan's own limit cut included, is
    ranked by its measured cost instead (`callgrind.rank`), and those whose code never ran are set apart
    in `off_path`."""
    from .roofline import adjust
    hypotheses = list(found.hypotheses)
    listed = {h.id for h in hypotheses}
    for det in found.detections:      # an applicable recipe cut by the scan's own limit comes back
        recipe = found.recipes.get(det.recipe)
        if det.status == "applicable" and recipe is not None and recipe.id not in listed:
            hypotheses.append(Hypothesis(
                id=recipe.id, title=recipe.title, kind=recipe.kind, rationale=recipe.why.strip(),
                expected=recipe.expected.strip(), ops=list(recipe.ops),
                evidence=[Evidence(*(e.split(": ", 1) if ": " in e else (e, "recipe probe"))) for e in det.evidence],
                score=KIND_WEIGHT[recipe.kind], recipe=recipe.id))
    by_ops = {tuple(h.ops): h for h in hypotheses if h.ops}
    for h in list(by_ops.values()):     # a recipe also implements the longer chains it covers
        recipe = found.recipes.get(h.recipe or "")
        for seq in (recipe.covers if recipe else []):
            by_ops.setdefault(tuple(seq), h)
    if sources is not None and sources.gaps is not None:
        for gap in sources.gaps.gaps[:GAP_HYPOTHESES]:
            same = by_ops.get(tuple(gap.ops))
            if same is not None:
                same.evidence += [Evidence(w, n) for w, n in gap.evidence()]
                continue
            hypotheses.append(gap_hypothesis(gap))
    verdict = sources.roofline if sources is not None else None
    for h in hypotheses:
        h.score = adjust(h.score, h.kind, verdict)
    if sources is not None and getattr(sources, "profile", None) is not None:
        apply_profile(hypotheses, sources, found.recipes, config)
    limit = config.research.max_hypotheses
    if callprof is not None:
        return _rank_measured(found, sources, hypotheses, callprof, limit, leads_take_slots)
    # Slots go first to what can be implemented (recipes, maintainer patches), so a lead from
    # another backend never pushes out a change the offline agent could have measured.
    # Equal scores (the bound's points stop at profile.RANK_BONUS_BOUND_CAP) go to the larger bound: on
    # the Qwen3 shape fa-tile-pack (+32.9%) and q4-0-unsigned-nibble (+240.8%) tied at 7.93 and the id
    # put the MUL_MAT recipe, +57% when measured, third.
    rank = (lambda h: (-h.score, -(h.bound_pct or 0.0), h.id))
    doable = sorted((h for h in hypotheses if h.recipe or h.patch), key=rank)[:limit]
    leads = sorted((h for h in hypotheses if not (h.recipe or h.patch)), key=rank)[: limit - len(doable)]
    notes = list(found.notes) + (list(sources.notes) if sources is not None else [])
    return Research(sorted(doable + leads, key=rank), found.findings, found.detections, found.recipes, notes)


def _rank_measured(found: Research, sources, hypotheses: list[Hypothesis], callprof, limit: int,
                   leads_take_slots: bool = True) -> Research:
    """`merge_sources` with a callgrind profile: the slots go to the most measured cost (`callgrind.rank`).
    Unless `leads_take_slots` (an agent that writes a lead's code itself), a lead (neither recipe nor
    patch) is listed where it ranks but takes none of the `limit` slots: offline it is skipped at no
    cost, and on xxHash four leads took four of eight slots from build options that were then never
    measured."""
    from .callgrind import rank
    claimed = {f.where for det in found.detections if det.status == "applicable"
               for f in found.findings if _overlaps(f, det.evidence)}
    listed = {e.where for h in hypotheses for e in h.evidence}
    hypotheses += [finding_hypothesis(f) for f in found.findings if f.where not in claimed | listed]
    ranked, off = rank(hypotheses, callprof, spans={f.where: (f.file, f.start, f.end) for f in found.findings},
                       passes={f.where: len(f.passes) for f in found.findings})
    notes = list(found.notes) + (list(sources.notes) if sources is not None else [])
    if leads_take_slots:
        return Research(_distinct_first(ranked, limit), found.findings, found.detections, found.recipes, notes,
                        off_path=off)
    doable = _distinct_first([h for h in ranked if h.recipe or h.patch], limit)
    leads = [h for h in ranked if not (h.recipe or h.patch)][:limit]
    kept = {id(h) for h in doable + leads}
    return Research([h for h in ranked if id(h) in kept], found.findings, found.detections, found.recipes, notes,
                    off_path=off)


def _distinct_first(ranked: list[Hypothesis], limit: int) -> list[Hypothesis]:
    """The `limit` best of `ranked`, in its order, every distinct change before another setting of one
    (`variant_of`: unroll 8 of a loop that unroll 4 also tries): on xxHash the second unroll factor of
    three loops took three of eight slots from -O3 and -funroll-loops, its two largest measured wins."""
    first = [h for h in ranked if not h.variant_of][:limit]
    chosen = {id(h) for h in first + [h for h in ranked if h.variant_of][:limit - len(first)]}
    return [h for h in ranked if id(h) in chosen]


def hypothesis_sequences(h: Hypothesis, recipes: dict[str, Recipe]) -> list[tuple[str, ...]]:
    """The node sequences a hypothesis would change: its ops, plus the longer chains its recipe covers."""
    recipe = recipes.get(h.recipe or "")
    return [tuple(h.ops)] + [tuple(s) for s in (recipe.covers if recipe else [])] if h.ops else []


def sequence_label(seqs: list[tuple[str, ...]]) -> str:
    first = "+".join(seqs[0])
    extra = ["+".join(s[len(seqs[0]):]) if s[:len(seqs[0])] == seqs[0] else "+".join(s) for s in seqs[1:]]
    return first + "".join(f" (+{e})" for e in extra)


def why_not_acting(h: Hypothesis, recipe: Recipe | None):
    """For Profile.bounds: why `h` cannot change a workload at all, "" when it can. Outside its
    recipe's token range (a prompt-only path on a 1-token graph); or a change to the split between
    threads on a workload that runs one thread, however much time its op takes."""
    def why(w) -> str:
        if recipe is not None and not recipe.acts_on(w.tokens):
            return f"this change acts only on {recipe.token_range()} ({w.tokens} per graph here)"
        if h.kind == "parallelism" and w.graphs and w.graphs[0].n_threads == 1:
            return f"{w.name} runs on one thread: a change to the split between threads has nothing to balance"
        return ""
    return why


def apply_profile(hypotheses: list[Hypothesis], sources, recipes: dict[str, Recipe], config: TargetConfig) -> None:
    """Each hypothesis gets its Amdahl bound per profiled workload as evidence (`profile:<workload>`),
    and its score the profile's weight on the primary metric's workload (profile.rank_factor: a
    bound below the effect floor cannot yield a kept result). Registers the sequences so the
    profile table in research.md lists them."""
    from . import profile as profile_mod
    prof = sources.profile
    primary = prof.workload(config.primary.name)
    if primary is None:
        sources.notes.append(f"profile: no workload is named after the primary metric {config.primary.name} "
                             f"(profiled: {', '.join(w.name for w in prof.workloads)}); ranking unchanged")
    for h in hypotheses:
        seqs = hypothesis_sequences(h, recipes)
        if not seqs:
            continue
        label = sequence_label(seqs)
        sources.profile_sequences.setdefault(label, seqs)
        bounds = prof.bounds(seqs, why_not_acting(h, recipes.get(h.recipe or "")))
        h.evidence += [Evidence(f"profile:{b.workload}", b.sentence(label)) for b in bounds]
        if primary is not None:
            pct = next(b for b in bounds if b.workload == primary.name).pct
            h.bound_pct = pct
            h.score = round(h.score * profile_mod.rank_factor(pct, config.thresholds.min_effect_pct)
                            + profile_mod.rank_bonus(pct), 3)


def model_digests(found: Research, sources) -> dict[str, str]:
    """What a model researcher reads: the offline ranking (recipe ids it may reuse) and the sources."""
    ranked = "\n".join(f"{h.id} [{h.kind}] {h.title}; ops {'+'.join(h.ops) or '-'}; "
                       f"{'offline recipe available' if h.recipe else 'no recipe'}; evidence "
                       + "; ".join(e.where for e in h.evidence[:4]) for h in found.hypotheses)
    d = {"offline ranking (reuse these ids when proposing the same change)": ranked}
    if found.notes:
        d["already present or not applicable"] = "\n".join(found.notes)
    if found.findings:
        d["memory-pass findings"] = "\n".join(f"{f.where} {f.describe()}" for f in found.findings[:40])
    if sources is not None:
        d.update(sources.digests())
    return d


def model_research(agent, found: Research, sources) -> tuple[list[Hypothesis], list[str]]:
    """Ranked hypotheses from a model researcher (`agent.research(digests)`), or the offline
    ranking with a note saying why the model's could not be used."""
    try:
        ranked = agent.research(model_digests(found, sources))
    except Exception as exc:   # noqa: BLE001 - budget, API or schema failure: keep the offline ranking
        return found.hypotheses, [f"model research not used ({type(exc).__name__}: {exc}); offline ranking kept"]
    return ranked, [f"ranked by {getattr(agent, 'name', 'the model')} from the source digests"]
