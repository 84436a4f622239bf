"""What a model agent says to the model, and the shapes its answers must have. Provider-neutral.

Three tasks: research (source digests in, ranked hypotheses out), implement (one hypothesis, a
tool-use loop: `jobs.agent.tools`), revise (results so far in, a revised ranking out). Structured
answers are forced tool calls validated with the pydantic models here. Every text that came from
outside (digests, rationale and evidence, results, the profile, issue bodies) is quoted as
untrusted data (`jobs.research.sanitize.quote`); the system prompts say how to treat it.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Literal

from pydantic import Field

from jobs.contract.config import TargetConfig
from jobs.contract.model import Evidence, ExperimentRecord, Hypothesis
from ..research.sanitize import DATA_RULE, quote
from .tools import ToolInput, tool


class EvidenceOut(ToolInput):
    where: str = Field(min_length=1, description="file:line in the tree, or a URL")
    note: str = ""


class HypothesisOut(ToolInput):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    title: str = Field(min_length=3, max_length=200)
    kind: Literal["fusion", "parallelism", "micro"]
    rationale: str = Field(min_length=3)
    expected: str = ""
    ops: list[str] = Field(default_factory=list)
    evidence: list[EvidenceOut] = Field(min_length=1)
    score: float = Field(ge=0, le=100)


class HypothesisList(ToolInput):
    hypotheses: list[HypothesisOut] = Field(min_length=1, max_length=30)


class Revision(ToolInput):
    order: list[str] = Field(description="ids of the pending hypotheses to keep, best first")
    drop: list[str] = Field(default_factory=list)
    add: list[HypothesisOut] = Field(default_factory=list, max_length=5)
    note: str = ""


SUBMIT_HYPOTHESES = tool("submit_hypotheses", "Submit the ranked hypotheses (best first).", HypothesisList)
SUBMIT_REVISION = tool("submit_revision", "Submit the revised ranking of the pending hypotheses.", Revision)

RESEARCH_SYSTEM = (
    "You plan CPU performance experiments for a C/C++ project. From the source digests, propose ranked "
    "hypotheses: one hypothesis = one patch = one experiment. Prefer fusions that remove whole memory "
    "passes when generation is memory-bound; SIMD micro-tuning of matmuls is usually noise. Every "
    "hypothesis cites evidence (file:line or URL) taken from the digests. Answer only by calling "
    "submit_hypotheses. " + DATA_RULE)
IMPLEMENT_SYSTEM = (
    "You implement one performance hypothesis as one minimal, correct patch in a git worktree. Use the "
    "tools: read and search the code, apply_edit, then build and quick_check. Only the configured "
    "editable paths can be changed; the benchmark, check and build scripts cannot. When the patch builds "
    "and passes the checks, reply with a one-paragraph summary and no tool call. If the hypothesis cannot "
    "be implemented, reply without editing and say why. " + DATA_RULE)
REVISE_SYSTEM = (
    "You re-rank the pending performance hypotheses in the light of the experiments so far: drop "
    "directions that measured as noise or losses, promote related ideas that won. Answer only by calling "
    "submit_revision. " + DATA_RULE)


def research_prompt(config: TargetConfig, digests: list[tuple[str, str]], untrusted: str) -> str:
    body = "\n\n".join(f"## {name}\n{quote(text, name, limit=30_000)}" for name, text in digests)
    return (f"Target: {config.name or 'repository'}; editable paths: {config.editable}; "
            f"primary metric: {config.primary.name} ({config.primary.direction} is better). "
            f"At most {config.research.max_hypotheses} hypotheses.\n\n"
            f"{untrusted}Source digests:\n\n{body}")


def implement_prompt(h: Hypothesis, config: TargetConfig, recipe: Any, profile_digest: str, untrusted: str) -> str:
    evidence = "\n".join(f"- {e.where}: {e.note}" for e in h.evidence)
    task = {"id": h.id, "title": h.title, "kind": h.kind, "ops": h.ops, "expected": h.expected}
    return (f"Implement this hypothesis in the repository (editable paths: {config.editable}).\n"
            f"{json.dumps(task, indent=1)}\n\nRationale and evidence (from research sources):\n"
            + quote(f"{h.rationale}\n{evidence}", f"hypothesis {h.id}")
            + (f"\n\nA recipe describes it:\n{quote(recipe.why + chr(10) + recipe.expected, 'recipe')}"
               if recipe else "")
            + (f"\n\nWhere the time goes (callgrind profile of the reduced workload, with the compiler's "
               f"remarks on the hot loops):\n{quote(profile_digest, 'profile')}" if profile_digest else "")
            + f"\n\n{untrusted}")


def revise_prompt(config: TargetConfig, pending: list[Hypothesis], results: list[ExperimentRecord]) -> str:
    summary = [{"hypothesis": r.hypothesis, "platform": r.platform, "status": r.status, "reason": r.reason,
                "primary": asdict(m) if (m := r.metric(config.primary.name)) else None} for r in results]
    return (f"Results so far (status, reason, primary metric {config.primary.name}):\n"
            + quote(json.dumps(summary, indent=1, default=str), "experiment results")
            + "\n\nPending hypotheses:\n" + json.dumps([brief(h) for h in pending], indent=1))


def hypothesis(out: HypothesisOut, recipes: dict) -> Hypothesis:
    return Hypothesis(id=out.id, title=out.title, kind=out.kind, rationale=out.rationale, expected=out.expected,
                      ops=list(out.ops), evidence=[Evidence(e.where, e.note) for e in out.evidence],
                      score=out.score, recipe=out.id if out.id in recipes else None)


def brief(h: Hypothesis) -> dict[str, Any]:
    return {"id": h.id, "title": h.title, "kind": h.kind, "ops": h.ops, "score": h.score,
            "expected": h.expected}
