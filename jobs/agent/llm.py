"""The model agent: research, implement and revise through any `chat.ChatModel`. Provider-neutral.

- `research(digests) -> [Hypothesis]`: source digests in, ranked hypotheses out (validated schema);
- `implement(h, tree, config) -> commit`: a tool-use loop in the experiment's worktree (`tools`);
- `revise(pending, results) -> [Hypothesis]`: results so far in, revised ranking out.

Rules kept here, in code, whatever the provider:
- every text that reaches a request is redacted of secret values from this process's environment
  and any the caller names (`jobs/guard/secrets.py`); untrusted documents are quoted as data (`prompts`);
- token and dollar caps per run, counted from each reply's usage (`meter`); a cap stops the agent
  with a reason (`BudgetExceeded`, a `NotImplementable` so the pipeline records it and moves on);
- a structured answer that fails its schema is sent back to the model as a tool error, a few times.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from jobs.guard import gitops
from jobs.contract.config import TargetConfig
from jobs.contract.model import ExperimentRecord, Hypothesis
from ..research.sanitize import quote, redact
from jobs.measure.isolation import Isolation
from jobs.guard.secrets import secret_values  # one policy: jobs/guard/secrets.py
from . import Agent, prompts
from .chat import ChatMessage, ChatModel, ChatReply, ChatRequest, ToolResult, ToolSpec
from .meter import BudgetExceeded, ChatSettings, Meter
from .offline import NotImplementable, OfflineAgent, commit_message
from .tools import IMPLEMENT_TOOLS, Workbench


class LLMAgent(Agent):
    ranks_from_digests = True           # research(digests)
    runs_target_code = True             # its workbench builds in the run's sandbox (`isolation`)
    reads_profile = True                # the callgrind digest goes into its prompts
    implements_leads = True             # writes the code of a lead ("speed up foo()") itself

    def __init__(self, name: str, recipes: dict, config: TargetConfig, chat: ChatModel, settings: ChatSettings,
                 secrets: list[str] | None = None, context: list[tuple[str, str]] | None = None):
        self.name = name                         # the registry's name (jobs/contract/agentkinds.py), shown in reports
        self.recipes = recipes
        self.config = config
        self.chat = chat
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

    def _call(self, system: str, messages: list[ChatMessage], tools: tuple[ToolSpec, ...],
              force_tool: str | None = None) -> ChatReply:
        self.meter.check()
        self.meter.price(self.settings.model)       # an unpriced model is refused before any spend
        reply = self.chat.complete(ChatRequest(self.settings.model, self.settings.max_tokens, self._safe(system),
                                               tuple(messages), tools, force_tool))
        self.meter.add(reply.usage, reply.model or self.settings.model)
        return reply

    def _structured(self, system: str, prompt: str, tool: ToolSpec, schema: type[BaseModel],
                    validate: Callable[[Any], None] | None = None, attempts: int = 3) -> Any:
        """Force `tool`, validate its input with `schema` (and `validate`), feed errors back."""
        messages = [ChatMessage("user", self._safe(prompt))]
        problem = "no answer"
        for _ in range(attempts):
            reply = self._call(system, messages, (tool,), tool.name)
            messages.append(reply.as_message())
            if not reply.calls:
                problem = "the model answered without calling " + tool.name
                messages.append(ChatMessage("user", f"Call {tool.name} with the answer."))
                continue
            results = []
            parsed = None
            for call in reply.calls:
                try:
                    candidate = schema.model_validate(call.input)
                    if validate:
                        validate(candidate)
                    parsed = parsed or candidate
                    results.append(ToolResult(call.id, "accepted"))
                except (ValidationError, ValueError) as exc:
                    problem = f"invalid {tool.name} input: {exc}"
                    results.append(ToolResult(call.id, self._safe(problem)[:2000], is_error=True))
            if parsed is not None:
                return parsed
            messages.append(ChatMessage("user", results=tuple(results)))
        raise ValueError(f"{tool.name}: no valid answer after {attempts} attempts ({problem})")

    # -- research -----------------------------------------------------------------------------------
    def research(self, digests: dict[str, str] | list[tuple[str, str]]) -> list[Hypothesis]:
        items = list(digests.items()) if isinstance(digests, dict) else list(digests)
        prompt = prompts.research_prompt(self.config, items, self._untrusted())

        def unique(out: prompts.HypothesisList) -> None:
            ids = [h.id for h in out.hypotheses]
            if len(set(ids)) != len(ids):
                raise ValueError("hypothesis ids must be unique")
        out = self._structured(prompts.RESEARCH_SYSTEM, prompt, prompts.SUBMIT_HYPOTHESES, prompts.HypothesisList,
                               unique)
        hyps = [prompts.hypothesis(h, self.recipes) for h in out.hypotheses]
        return hyps[: self.config.research.max_hypotheses]

    # -- revise -------------------------------------------------------------------------------------
    def revise(self, pending: list[Hypothesis], results: list[ExperimentRecord]) -> list[Hypothesis]:
        tried = {r.hypothesis for r in results}
        pending = [h for h in pending if h.id not in tried]
        if not pending:
            return []
        by_id = {h.id: h for h in pending}
        prompt = prompts.revise_prompt(self.config, pending, results)

        def known(rev: prompts.Revision) -> None:
            unknown = [i for i in rev.order + rev.drop if i not in by_id]
            if unknown:
                raise ValueError(f"unknown ids {unknown}; pending ids are {sorted(by_id)}")
            clash = [h.id for h in rev.add if h.id in by_id or h.id in tried]
            if clash:
                raise ValueError(f"added ids {clash} already exist")
        try:
            rev = self._structured(prompts.REVISE_SYSTEM, prompt, prompts.SUBMIT_REVISION, prompts.Revision, known)
        except BudgetExceeded:
            return pending                        # the ranking stands; implement() reports the stop
        except ValueError as exc:
            self.log.append({"tool": "submit_revision", "error": str(exc)})
            return pending
        dropped = set(rev.drop)
        ordered = [by_id[i] for i in rev.order if i not in dropped]
        seen = {h.id for h in ordered}
        rest = [h for h in pending if h.id not in seen and h.id not in dropped]
        return ordered + [prompts.hypothesis(h, self.recipes) for h in rev.add] + rest

    # -- implement ----------------------------------------------------------------------------------
    def implement(self, h: Hypothesis, tree: Path, config: TargetConfig) -> str:
        tree = Path(tree)
        if h.patch:                                       # a maintainer's patch needs no model
            return OfflineAgent(self.recipes).implement(h, tree, config)
        self.meter.check()
        bench = Workbench(tree, config, self.isolation)
        prompt = prompts.implement_prompt(h, config, self.recipes.get(h.recipe or ""), self.profile_digest,
                                          self._untrusted())
        messages = [ChatMessage("user", self._safe(prompt))]
        final_text = ""
        for _turn in range(self.settings.max_turns):
            reply = self._call(prompts.IMPLEMENT_SYSTEM, messages, IMPLEMENT_TOOLS)
            messages.append(reply.as_message())
            final_text = reply.text.strip()
            if not reply.calls:
                break
            results = []
            for call in reply.calls:
                text, is_error = bench.run(call.name, call.input)
                self.log.append({"hypothesis": h.id, "tool": call.name, "error": is_error, "result": text[:200]})
                results.append(ToolResult(call.id, self._safe(text), is_error))
            messages.append(ChatMessage("user", results=tuple(results)))
        else:
            raise NotImplementable(f"no finished patch after {self.settings.max_turns} tool turns")
        if not bench.edited:
            raise NotImplementable("the model made no edit" + (f": {final_text[:300]}" if final_text else ""))
        # The builds ran with this tree writable: git runs here only against the real repository
        # (a pinned worktree), and not at all if they touched the tree's `.git` (gitops.check_worktree).
        try:
            gitops.git(tree, "add", "--", *sorted(bench.edited))
            if not gitops.git(tree, "diff", "--cached", "--name-only"):
                raise NotImplementable("the model's edits left the tree unchanged")
            message = commit_message(h, None) + (f"\nAgent summary: {self._safe(final_text)[:1500]}\n"
                                                 if final_text else "")
            gitops.git(tree, "commit", "-q", "--no-verify", "-m", message)
            return gitops.head_commit(tree)
        except gitops.GitError as exc:
            raise NotImplementable(f"the attempt's commit was refused: {self._safe(str(exc))[:1000]}") from None
