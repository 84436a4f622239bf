"""The Claude agent (Anthropic Messages API, tool use) beside the offline one, same interface:

- `research(digests) -> [Hypothesis]`: source digests in, ranked hypotheses out (validated schema);
- `implement(h, tree, config) -> commit`: a tool-use loop in the experiment's worktree;
- `revise(pending, results) -> [Hypothesis]`: results so far in, revised ranking out.

Rules this module keeps (enforced in code, never left to the prompt):
- every write goes through `guard.check_edit`; a refused edit is a tool error the model reads;
- build/check tools run the target's own commands in `secrets.scrubbed_env()` (no credentials);
- every text that reaches a request is redacted of secret values from this process's environment
  and any the caller names; untrusted documents are stripped of hidden content and quoted as data;
- token and dollar caps per run, counted from each response's `usage`; a cap stops the agent with
  a reason (`BudgetExceeded`, a `NotImplementable` so the pipeline records it and moves on);
- retries and timeouts are the SDK's own (`max_retries`, `timeout` on the client);
- malformed tool input gets a tool_result error, never an exception.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import gitops, safefs
from ..config import LLM, TargetConfig
from ..errors import RunError
from ..model import Evidence, Hypothesis
from ..research.sanitize import DATA_RULE, quote, redact
from ..results import metric
from ..runner import Isolation, run_step, tail
from ..spec import SandboxSpec
from ..secrets import secret_values  # one policy: jobs/secrets.py
from .guard import EditRefused, check_edit
from .offline import NotImplementable, commit_message

_CAPS = LLM()              # the model and caps have one home: the repo config schema (jobs/config.py)
DEFAULT_MODEL = _CAPS.model
# USD per million tokens (input, output, 5-minute cache write, cache read), Anthropic's published
# rates when written. The repo config's pricing table overrides and extends this; a model with no
# price is refused, since its spending could not be capped.
DEFAULT_PRICING: dict[str, dict[str, float]] = {
    "claude-sonnet-4-6": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.30},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.10},
}
READ_LIMIT = 12_000       # characters of a file per read_file call
OUTPUT_LIMIT = 3_000      # characters of build/check output returned to the model
SEARCH_LIMIT = 40         # matches per search_code call
UNTRUSTED_NAMES = re.compile(r"(^|/)(AGENTS|CLAUDE|README|CONTRIBUTING)[^/]*$", re.I)


class BudgetExceeded(NotImplementable):
    """A token or dollar cap of this run was reached; no further API calls are made."""


class ClaudeUnavailable(RuntimeError):
    """The Claude agent cannot start (no API key, SDK missing)."""


# -- settings and metering ----------------------------------------------------------------------
@dataclass
class Settings:
    model: str = DEFAULT_MODEL
    max_tokens: int = _CAPS.max_tokens              # per response
    max_run_tokens: int = _CAPS.max_run_tokens      # input + output, whole run
    max_usd: float = _CAPS.max_usd                  # whole run
    max_turns: int = _CAPS.max_turns                # tool-use turns per hypothesis
    max_retries: int = _CAPS.max_retries            # the SDK's own retry policy
    timeout: float = _CAPS.timeout                  # seconds per request, the SDK's own
    pricing: dict[str, dict[str, float]] = field(default_factory=lambda: dict(DEFAULT_PRICING))

    @classmethod
    def from_config(cls, config: TargetConfig, **overrides: Any) -> "Settings":
        """Defaults <- `config.llm` (when the schema has it) <- keyword overrides."""
        values: dict[str, Any] = {}
        llm = getattr(config, "llm", None)
        if llm is not None:
            data = llm.model_dump() if hasattr(llm, "model_dump") else dict(llm)
            values.update({k: v for k, v in data.items() if k in cls.__dataclass_fields__ and v is not None})
        values.update({k: v for k, v in overrides.items() if k in cls.__dataclass_fields__ and v is not None})
        settings = cls(**values)
        if "pricing" in values:   # unset cache rates fall back to the input rate, not to None
            given = {m: {k: v for k, v in p.items() if v is not None} for m, p in values["pricing"].items()}
            settings.pricing = {**DEFAULT_PRICING, **given}
        return settings


@dataclass
class Meter:
    """Tokens and dollars of this run, from each response's `usage`."""

    settings: Settings
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    calls: int = 0
    stopped: str = ""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def price(self, model: str) -> dict[str, float]:
        if model in self.settings.pricing:
            return self.settings.pricing[model]
        for name, price in self.settings.pricing.items():   # dated ids: claude-sonnet-4-5-2025...
            if model.startswith(name):
                return price
        raise BudgetExceeded(f"no price for model {model!r} in the pricing table; add it to the config "
                             "so spending can be capped")

    def check(self) -> None:
        if self.stopped:
            raise BudgetExceeded(self.stopped)
        s = self.settings
        if self.tokens >= s.max_run_tokens:
            self.stopped = f"LLM budget: {self.tokens} tokens used, cap {s.max_run_tokens}"
        elif self.usd >= s.max_usd:
            self.stopped = f"LLM budget: {self.usd:.4f} USD spent, cap {s.max_usd:g} USD"
        if self.stopped:
            raise BudgetExceeded(self.stopped)

    def add(self, usage: Any, model: str) -> None:
        price = self.price(model)
        get = (lambda k: getattr(usage, k, 0) or 0)
        fresh, out = get("input_tokens"), get("output_tokens")
        cw, cr = get("cache_creation_input_tokens"), get("cache_read_input_tokens")
        self.calls += 1
        self.input_tokens += fresh + cw + cr
        self.output_tokens += out
        self.usd += (fresh * price["input"] + out * price["output"] + cw * price.get("cache_write", price["input"])
                     + cr * price.get("cache_read", price["input"])) / 1e6

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost_usd": round(self.usd, 6), "stopped": self.stopped}


# -- schemas: tool inputs and structured outputs -----------------------------------------------
class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadFile(_In):
    path: str = Field(min_length=1, description="path relative to the repository root")
    start_line: int = Field(1, ge=1)
    end_line: int | None = Field(None, ge=1)


class SearchCode(_In):
    pattern: str = Field(min_length=1, max_length=200, description="Python regular expression")
    glob: str = Field("**/*", description="which files, e.g. 'ggml/src/ggml-cpu/**/*.c'")


class ApplyEdit(_In):
    path: str = Field(min_length=1)
    old: str = Field(description="exact text to replace (must occur exactly once); '' creates a new file")
    new: str


class NoInput(_In):
    pass


class EvidenceOut(_In):
    where: str = Field(min_length=1, description="file:line in the tree, or a URL")
    note: str = ""


class HypothesisOut(_In):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    title: str = Field(min_length=3, max_length=200)
    kind: Literal["fusion", "parallelism", "micro"]
    rationale: str = Field(min_length=3)
    expected: str = ""
    ops: list[str] = Field(default_factory=list)
    evidence: list[EvidenceOut] = Field(min_length=1)
    score: float = Field(ge=0, le=100)


class HypothesisList(_In):
    hypotheses: list[HypothesisOut] = Field(min_length=1, max_length=30)


class Revision(_In):
    order: list[str] = Field(description="ids of the pending hypotheses to keep, best first")
    drop: list[str] = Field(default_factory=list)
    add: list[HypothesisOut] = Field(default_factory=list, max_length=5)
    note: str = ""


def _tool(name: str, description: str, model: type[BaseModel]) -> dict[str, Any]:
    return {"name": name, "description": description, "input_schema": model.model_json_schema()}


IMPLEMENT_TOOLS = [
    _tool("read_file", "Read a file of the repository (numbered lines).", ReadFile),
    _tool("search_code", "Search the repository with a regular expression; returns file:line: text.", SearchCode),
    _tool("apply_edit", "Replace one exact occurrence of `old` with `new` in a file, or create a new file "
                        "with old=''. Only the configured editable paths may change.", ApplyEdit),
    _tool("build", "Run the target's build command in the worktree; returns exit code and output tail.", NoInput),
    _tool("quick_check", "Run the target's correctness checks; returns exit code and output tail.", NoInput),
]
SUBMIT_HYPOTHESES = _tool("submit_hypotheses", "Submit the ranked hypotheses (best first).", HypothesisList)
SUBMIT_REVISION = _tool("submit_revision", "Submit the revised ranking of the pending hypotheses.", Revision)

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


def _hypothesis(out: HypothesisOut, recipes: dict) -> Hypothesis:
    return Hypothesis(id=out.id, title=out.title, kind=out.kind, rationale=out.rationale, expected=out.expected,
                      ops=list(out.ops), evidence=[Evidence(e.where, e.note) for e in out.evidence],
                      score=out.score, recipe=out.id if out.id in recipes else None)


def _brief(h: Hypothesis) -> dict[str, Any]:
    return {"id": h.id, "title": h.title, "kind": h.kind, "ops": h.ops, "score": h.score,
            "expected": h.expected}


# -- the agent ------------------------------------------------------------------------------------
class ClaudeAgent:
    name = "claude"

    def __init__(self, recipes: dict, config: TargetConfig, client: Any, settings: Settings,
                 secrets: list[str] | None = None, context: list[tuple[str, str]] | None = None):
        self.recipes = recipes
        self.config = config
        self.client = client
        self.settings = settings
        self.meter = Meter(settings)
        self.secrets = secret_values(secrets)
        self.context = list(context or [])       # (source, untrusted text): issue body, AGENTS.md, ...
        self.isolation: Isolation | None = None  # the run's sandbox settings (set by the pipeline)
        self.log: list[dict[str, Any]] = []       # one entry per tool call, for the run's record
        self.profile_digest = ""                  # the callgrind profile + compiler remarks (set by the pipeline)

    # -- plumbing ---------------------------------------------------------------------------------
    def _safe(self, text: str) -> str:
        return redact(text, self.secrets)

    def _untrusted(self) -> str:
        if not self.context:
            return ""
        return "\n\n".join(self._safe(quote(text, source)) for source, text in self.context) + "\n\n"

    def _call(self, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
              tool_choice: dict[str, Any] | None = None):
        self.meter.check()
        self.meter.price(self.settings.model)       # an unpriced model is refused before any spend
        kw: dict[str, Any] = {"model": self.settings.model, "max_tokens": self.settings.max_tokens,
                              "system": self._safe(system), "messages": messages, "tools": tools}
        if tool_choice:
            kw["tool_choice"] = tool_choice
        response = self.client.messages.create(**kw)
        self.meter.add(response.usage, getattr(response, "model", None) or self.settings.model)
        return response

    @staticmethod
    def _assistant(response) -> dict[str, Any]:
        return {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in response.content]}

    def _structured(self, system: str, prompt: str, tool: dict[str, Any], schema: type[BaseModel],
                    validate=None, attempts: int = 3) -> BaseModel:
        """Force `tool`, validate its input with `schema` (and `validate`), feed errors back."""
        messages: list[dict[str, Any]] = [{"role": "user", "content": self._safe(prompt)}]
        problem = "no answer"
        for _ in range(attempts):
            response = self._call(system, messages, [tool], {"type": "tool", "name": tool["name"]})
            messages.append(self._assistant(response))
            uses = [b for b in response.content if b.type == "tool_use"]
            if not uses:
                problem = "the model answered without calling " + tool["name"]
                messages.append({"role": "user", "content": f"Call {tool['name']} with the answer."})
                continue
            results = []
            parsed = None
            for use in uses:
                try:
                    candidate = schema.model_validate(use.input)
                    if validate:
                        validate(candidate)
                    parsed = parsed or candidate
                    results.append({"type": "tool_result", "tool_use_id": use.id, "content": "accepted"})
                except (ValidationError, ValueError) as exc:
                    problem = f"invalid {tool['name']} input: {exc}"
                    results.append({"type": "tool_result", "tool_use_id": use.id, "is_error": True,
                                    "content": self._safe(problem)[:2000]})
            if parsed is not None:
                return parsed
            messages.append({"role": "user", "content": results})
        raise ValueError(f"{tool['name']}: no valid answer after {attempts} attempts ({problem})")

    # -- research -----------------------------------------------------------------------------------
    def research(self, digests: dict[str, str] | list[tuple[str, str]]) -> list[Hypothesis]:
        items = list(digests.items()) if isinstance(digests, dict) else list(digests)
        body = "\n\n".join(f"## {name}\n{quote(text, name, limit=30_000)}" for name, text in items)
        prompt = (f"Target: {self.config.name or 'repository'}; editable paths: {self.config.editable}; "
                  f"primary metric: {self.config.primary.name} ({self.config.primary.direction} is better). "
                  f"At most {self.config.research.max_hypotheses} hypotheses.\n\n"
                  f"{self._untrusted()}Source digests:\n\n{body}")

        def unique(out: HypothesisList) -> None:
            ids = [h.id for h in out.hypotheses]
            if len(set(ids)) != len(ids):
                raise ValueError("hypothesis ids must be unique")
        out = self._structured(RESEARCH_SYSTEM, prompt, SUBMIT_HYPOTHESES, HypothesisList, unique)
        hyps = [_hypothesis(h, self.recipes) for h in out.hypotheses]
        return hyps[: self.config.research.max_hypotheses]

    # -- revise -------------------------------------------------------------------------------------
    def revise(self, pending: list[Hypothesis], results: list[dict[str, Any]]) -> list[Hypothesis]:
        tried = {r["hypothesis"] for r in results}
        pending = [h for h in pending if h.id not in tried]
        if not pending:
            return []
        by_id = {h.id: h for h in pending}
        summary = [{"hypothesis": r["hypothesis"], "platform": r.get("platform"), "status": r["status"],
                    "reason": r.get("reason", ""),
                    "primary": metric(r, self.config.primary.name)} for r in results]
        prompt = (f"Results so far (status, reason, primary metric {self.config.primary.name}):\n"
                  + quote(json.dumps(summary, indent=1, default=str), "experiment results")
                  + "\n\nPending hypotheses:\n" + json.dumps([_brief(h) for h in pending], indent=1))

        def known(rev: Revision) -> None:
            unknown = [i for i in rev.order + rev.drop if i not in by_id]
            if unknown:
                raise ValueError(f"unknown ids {unknown}; pending ids are {sorted(by_id)}")
            clash = [h.id for h in rev.add if h.id in by_id or h.id in tried]
            if clash:
                raise ValueError(f"added ids {clash} already exist")
        try:
            rev = self._structured(REVISE_SYSTEM, prompt, SUBMIT_REVISION, Revision, known)
        except BudgetExceeded:
            return pending                        # the ranking stands; implement() reports the stop
        except ValueError as exc:
            self.log.append({"tool": "submit_revision", "error": str(exc)})
            return pending
        dropped = set(rev.drop)
        ordered = [by_id[i] for i in rev.order if i not in dropped]
        seen = {h.id for h in ordered}
        rest = [h for h in pending if h.id not in seen and h.id not in dropped]
        return ordered + [_hypothesis(h, self.recipes) for h in rev.add] + rest

    # -- implement ----------------------------------------------------------------------------------
    def implement(self, h: Hypothesis, tree: Path, config: TargetConfig) -> str:
        tree = Path(tree)
        if h.patch:
            from .offline import OfflineAgent
            return OfflineAgent(self.recipes).implement(h, tree, config)
        self.meter.check()
        edited: set[str] = set()
        evidence = "\n".join(f"- {e.where}: {e.note}" for e in h.evidence)
        recipe = self.recipes.get(h.recipe or "")
        task = {"id": h.id, "title": h.title, "kind": h.kind, "ops": h.ops, "expected": h.expected}
        prompt = (f"Implement this hypothesis in the repository (editable paths: {config.editable}).\n"
                  f"{json.dumps(task, indent=1)}\n\nRationale and evidence (from research sources):\n"
                  + quote(f"{h.rationale}\n{evidence}", f"hypothesis {h.id}")
                  + (f"\n\nA recipe describes it:\n{quote(recipe.why + chr(10) + recipe.expected, 'recipe')}"
                     if recipe else "")
                  + (f"\n\nWhere the time goes (callgrind profile of the reduced workload, with the compiler's "
                     f"remarks on the hot loops):\n{quote(self.profile_digest, 'profile')}" if self.profile_digest else "")
                  + f"\n\n{self._untrusted()}")
        messages: list[dict[str, Any]] = [{"role": "user", "content": self._safe(prompt)}]
        final_text = ""
        for _turn in range(self.settings.max_turns):
            response = self._call(IMPLEMENT_SYSTEM, messages, IMPLEMENT_TOOLS)
            messages.append(self._assistant(response))
            uses = [b for b in response.content if b.type == "tool_use"]
            final_text = " ".join(b.text for b in response.content if b.type == "text").strip()
            if not uses:
                break
            results = []
            for use in uses:
                text, is_error = self._run_tool(use.name, use.input, tree, config, edited)
                self.log.append({"hypothesis": h.id, "tool": use.name, "error": is_error, "result": text[:200]})
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": use.id, "content": self._safe(text)}
                if is_error:
                    result["is_error"] = True
                results.append(result)
            messages.append({"role": "user", "content": results})
        else:
            raise NotImplementable(f"no finished patch after {self.settings.max_turns} tool turns")
        if not edited:
            raise NotImplementable("the model made no edit" + (f": {final_text[:300]}" if final_text else ""))
        # The builds ran with this tree writable: git runs here only against the real repository
        # (a pinned worktree), and not at all if they touched the tree's `.git` (gitops.check_worktree).
        try:
            gitops.git(tree, "add", "--", *sorted(edited))
            if not gitops.git(tree, "diff", "--cached", "--name-only"):
                raise NotImplementable("the model's edits left the tree unchanged")
            message = commit_message(h, None) + (f"\nAgent summary: {self._safe(final_text)[:1500]}\n"
                                                 if final_text else "")
            gitops.git(tree, "commit", "-q", "--no-verify", "-m", message)
            return gitops.head_commit(tree)
        except gitops.GitError as exc:
            raise NotImplementable(f"the attempt's commit was refused: {self._safe(str(exc))[:1000]}") from None

    # -- tools --------------------------------------------------------------------------------------
    def _run_tool(self, name: str, raw: Any, tree: Path, config: TargetConfig, edited: set[str]) -> tuple[str, bool]:
        handlers = {"read_file": (ReadFile, self._read_file), "search_code": (SearchCode, self._search_code),
                    "apply_edit": (ApplyEdit, self._apply_edit), "build": (NoInput, self._build),
                    "quick_check": (NoInput, self._quick_check)}
        if name not in handlers:
            return f"unknown tool {name!r}; available: {', '.join(handlers)}", True
        schema, handler = handlers[name]
        try:
            args = schema.model_validate(raw if isinstance(raw, dict) else {"_": raw})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
            return f"invalid input for {name}: {problems}", True
        try:
            return handler(args, tree, config, edited)
        except EditRefused as exc:
            return f"refused: {exc}", True
        except (OSError, UnicodeError, re.error) as exc:
            return f"{name} failed: {exc}", True

    @staticmethod
    def _inside(tree: Path, rel: str) -> Path:
        path = (tree / rel).resolve()
        if not path.is_relative_to(tree.resolve()) or ".git" in [p.lower() for p in Path(rel).parts]:
            raise EditRefused(f"{rel}: outside the repository")
        return path

    @staticmethod
    def _text(tree: Path, path: Path, errors: str = "replace") -> str:
        """A file of the tree, read without following links and at most TEXT_LIMIT bytes: the tree
        holds what builds wrote (a link to a key, a 10 GB file), never read through or in full."""
        rel = path.relative_to(tree.resolve()).as_posix()
        return safefs.read_text(tree.resolve(), rel, safefs.TEXT_LIMIT, errors=errors)

    def _read_file(self, a: ReadFile, tree: Path, config: TargetConfig, edited: set[str]) -> tuple[str, bool]:
        path = self._inside(tree, a.path)
        if not path.is_file():
            return f"{a.path}: no such file", True
        lines = self._text(tree, path).splitlines()
        end = min(len(lines), a.end_line or len(lines))
        out, size = [], 0
        for n in range(a.start_line, end + 1):
            row = f"{n}: {lines[n - 1]}"
            size += len(row) + 1
            if size > READ_LIMIT:
                out.append(f"[... truncated at line {n}; read on with start_line={n}]")
                break
            out.append(row)
        text = "\n".join(out) or f"{a.path}: {len(lines)} lines; nothing in that range"
        if UNTRUSTED_NAMES.search(a.path):
            text = quote(text, a.path)
        return text, False

    def _search_code(self, a: SearchCode, tree: Path, config: TargetConfig, edited: set[str]) -> tuple[str, bool]:
        if a.glob.startswith("/") or ".." in Path(a.glob).parts:
            return f"glob {a.glob!r}: must stay inside the repository", True
        rx = re.compile(a.pattern)
        hits = []
        for path in sorted(tree.glob(a.glob)):
            rel = path.relative_to(tree).as_posix()
            if rel.startswith(".git/") or not safefs.is_regular(tree, rel):
                continue
            try:
                text = safefs.read_text(tree, rel, safefs.TEXT_LIMIT, errors="replace")
            except OSError:
                continue                              # too large to search
            for n, line in enumerate(text.splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{rel}:{n}: {line.strip()[:200]}")
                    if len(hits) >= SEARCH_LIMIT:
                        return "\n".join(hits + ["[... more matches; narrow the pattern or glob]"]), False
        return "\n".join(hits) or "no matches", False

    def _apply_edit(self, a: ApplyEdit, tree: Path, config: TargetConfig, edited: set[str]) -> tuple[str, bool]:
        rel = check_edit(a.path, tree, config)          # raises EditRefused: the tool refuses
        path = self._inside(tree, rel)
        if a.old == "":
            if path.exists():
                return f"{rel} exists; give the exact text to replace in `old`", True
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(a.new, encoding="utf-8")
        else:
            if not path.is_file():
                return f"{rel}: no such file (use old='' to create it)", True
            text = self._text(tree, path, errors="strict")
            count = text.count(a.old)
            if count != 1:
                return f"`old` occurs {count} times in {rel}; it must occur exactly once", True
            path.write_text(text.replace(a.old, a.new, 1), encoding="utf-8")
        edited.add(rel)
        return f"edited {rel}", False

    def _step(self, command: str, tree: Path, timeout: float, label: str) -> tuple[str, bool]:
        # The target's own build/checks: in the run's sandbox as the operator decided it (the
        # pipeline sets it). Without one, the strictest: sandboxed, no declared paths, no variables;
        # never the repository's own `enabled`/`env` (issue 20: the repository only asks).
        isolation = self.isolation or Isolation.from_spec(SandboxSpec())
        step = run_step(command, tree, timeout, isolation=isolation)
        if step.returncode is None:
            return f"{label} timed out after {timeout:.0f} s\n{tail(step.output, OUTPUT_LIMIT)}", True
        return f"{label} exit {step.returncode}\n{tail(step.output, OUTPUT_LIMIT)}", step.returncode != 0

    def _build(self, a: NoInput, tree: Path, config: TargetConfig, edited: set[str]) -> tuple[str, bool]:
        return self._step(config.build, tree, config.timeouts.build, "build")

    def _quick_check(self, a: NoInput, tree: Path, config: TargetConfig, edited: set[str]) -> tuple[str, bool]:
        return self._step(config.checks, tree, config.timeouts.checks, "checks")


def make_claude_agent(recipes: dict, config: TargetConfig, *, client: Any = None, api_key: str | None = None,
                      base_url: str | None = None, secrets: list[str] | None = None,
                      context: list[tuple[str, str]] | None = None, **settings: Any) -> ClaudeAgent:
    """The Claude agent. Needs ANTHROPIC_API_KEY (or `api_key`) unless a `client` is given."""
    s = Settings.from_config(config, **settings)
    if client is None:
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise RunError("--agent claude needs ANTHROPIC_API_KEY in the environment; without it use "
                           "--agent offline (the default)")
        try:
            import anthropic
        except ImportError:
            raise RunError("--agent claude needs the anthropic SDK: pip install 'autoresearch[llm]'") from None
        client = anthropic.Anthropic(api_key=key, base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL"),
                                     max_retries=s.max_retries, timeout=s.timeout)
        secrets = list(secrets or []) + [key]
    return ClaudeAgent(recipes, config, client, s, secrets=secrets, context=context)
