"""Planning a run for `bot.flow`: the config read over the API, the clone, the research and the
plan, made once; the plan's id; and what a plan awaiting approval may keep on disk.

**The plan id** (`plan_id`), the one an approver names in `/autoresearch approve ID`, is a digest of
every field of the plan (`plan_content`: repository, issue, run id, base commit, the command's
overrides such as the metric, the priced plan with its platforms, instance types, budget and
estimate, a digest of the narrowed config, each maintainer candidate's name and content digest,
the research's hypotheses) and of a random nonce stored with the plan (`RunRecord.plan_nonce`).
So an approval approves exactly the plan its approver saw: a requester who swaps his pending plan
(another metric, budget, platform) gets a new id, and `approve OLD` approves nothing; when the run
starts, the id is computed again from what is about to run and must still match the approval. The
nonce makes ids of equal plans differ across issues, repositories and runs; the same request
repeated while its plan awaits approval keeps its id (`same_plan_nonce`: nothing changed).

**Clones before approval** (issue 20, N6): a requester who may not spend gets his plan, but no
clone is left behind for it: the clone is researched once, the preparation (`prepared.json`,
the candidates) is kept, and the clone itself removed (`release_clone`); the approved run clones
again. Repeating the same request at the same base reuses the saved preparation without cloning
(`prepare`), and a pending plan that is superseded or cancelled loses its whole folder
(`discard`). So an outsider's comments cost at most one temporary clone each and leave at most
one small folder per issue.

**What planning is handed**: not the flow, but the ports it works through, as one value (`Clones`:
the repository's host, git, the token for its clones, and the place where its runs live), which
`bot.flow.Flow.clones` makes; it returns a preparation or raises `Reply`, and never calls back into
the flow.
"""
from __future__ import annotations

import hashlib
import json
import secrets
import shutil
from dataclasses import asdict, dataclass
from typing import Any

from jobs import api
from jobs.guard import mdsafe
from jobs.guard.mdsafe import md
from jobs.api import CONFIG_PATH, ConfigError, OverrideError, Overrides, parse_config

from . import approval as ap
from .ports import GitRemote, Place, RepoHost, Reply, TokenProvider
from .record import RunRecord
from .status import config_error_reply, help_reply


@dataclass(frozen=True)
class Clones:
    """One repository as planning reaches it: its host (the config, the branch head), git and the
    token for its clones, and the place where its runs live."""
    gh: RepoHost
    git: GitRemote
    token: TokenProvider
    place: Place

    def layout(self, run_id: str) -> api.RunLayout:
        return api.RunLayout(self.place.workdir, self.gh.owner, self.gh.repo, run_id)

    def checkout(self, layout: api.RunLayout, commit: str, branch: str) -> None:
        """A clean tree of the repository at `commit` in the run's clone (cloned again if it was
        released); `branch` is where the commit is found (nothing is fetched if it is there)."""
        self.git.checkout(self.place.clone_url(self.gh.owner, self.gh.repo), layout.clone, commit, self.token,
                          ref=branch)


def run_id_for(issue: int, base: str, overrides: Overrides) -> str:
    """Stable per (issue, base commit, command arguments): a rerun of the same request resumes
    the same run (finished experiments are never re-run or paid for twice)."""
    rid = f"{issue}-{base[:7]}"
    if overrides:
        rid += "-" + hashlib.sha256(json.dumps(overrides.to_dict(), sort_keys=True).encode()).hexdigest()[:4]
    return rid


def new_nonce() -> str:
    return secrets.token_hex(16)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def plan_content(prep: api.Preparation, repo: str, issue: int, overrides: Overrides) -> dict[str, Any]:
    """Every field of the plan as plain data (see the module docstring)."""
    config = json.dumps(prep.config.model_dump(mode="json"), sort_keys=True, default=str).encode()
    hypotheses = [[h.id, h.title, h.kind, h.recipe or ""] for h in prep.research.hypotheses] if prep.research else None
    return {"repo": repo.lower(), "issue": issue, "run_id": prep.layout.run_id, "base": prep.base,
            "overrides": overrides.to_dict(), "plan": asdict(prep.plan), "config": _sha(config),
            "candidates": [[c.name, _sha(c.read_bytes())] for c in prep.candidates], "hypotheses": hypotheses}


def plan_id(prep: api.Preparation, repo: str, issue: int, overrides: Overrides, nonce: str) -> str:
    return ap.plan_id(plan_content(prep, repo, issue, overrides), nonce)


def record_plan_id(prep: api.Preparation, rec: RunRecord) -> str:
    """The id of `prep` as the plan of `rec` (its repository, issue, overrides and nonce); '' for a
    record without a nonce (made before plan ids had one): no approval matches it, it is planned again."""
    if not rec.plan_nonce:
        return ""
    return plan_id(prep, rec.repo, rec.issue, rec.overrides, rec.plan_nonce)


def same_plan_nonce(prep: api.Preparation, pending: RunRecord | None) -> str:
    """The nonce of `pending` when it awaits approval for exactly this plan (the same request again):
    its id stays, so an approval being written for it still holds; '' otherwise (a new id)."""
    if pending is None or pending.state != ap.AWAITING or not pending.plan_nonce:
        return ""
    return pending.plan_nonce if record_plan_id(prep, pending) == pending.plan_digest else ""


def prepare(repo: Clones, issue: int, default_branch: str, overrides: Overrides, base: str | None = None) -> api.Preparation:
    """Config at `base` (default: the branch head) narrowed by the command, the clone, the
    research and the plan, all once. Raises Reply for what the requester must fix."""
    base = base or repo.gh.head_sha(default_branch)
    text = repo.gh.file_text(CONFIG_PATH, base)
    if text is None:
        raise Reply(config_error_reply(CONFIG_PATH, [("(file)", "not found on the default branch; add it "
                                                       "(see the autoresearch docs)")]))
    try:
        config = parse_config(text, CONFIG_PATH).narrow(overrides)
    except ConfigError as exc:
        raise Reply(config_error_reply(CONFIG_PATH, exc.problems)) from None
    except OverrideError as exc:
        raise Reply(help_reply(str(exc))) from None
    layout = repo.layout(run_id_for(issue, base, overrides))
    saved = api.load_preparation(layout, repo.place.executor)
    if saved is not None and saved.base == base and saved.config == config:
        return saved                     # the same request at the same base: planned already, no clone
    fresh = not layout.out.exists()
    try:
        repo.checkout(layout, base, default_branch)
        return api.prepare(layout, base, config, repo.place.executor)
    except api.PlanError as exc:
        if fresh:
            discard(layout)
        raise Reply(md("autoresearch: {}\n", mdsafe.prose(str(exc), 1500))) from None     # names config values
    except BaseException:
        if fresh:
            discard(layout)              # nothing of a plan that was never made stays on disk
        raise


def prepared(repo: Clones, rec: RunRecord) -> api.Preparation:
    """The run's preparation if the default branch is still at its base (made again only where
    this machine lacks it); else a new run's, at the new base."""
    head = repo.gh.head_sha(rec.default_branch)
    if head == rec.base_commit:
        layout = repo.layout(rec.run_id)
        prep = api.load_preparation(layout, repo.place.executor)
        if prep is not None and prep.base == head:
            repo.checkout(layout, head, rec.default_branch)    # a clean tree; clones again if it was released
            return prep
    return prepare(repo, rec.issue, rec.default_branch, rec.overrides, base=head)


def release_clone(layout: api.RunLayout) -> None:
    """A plan awaiting approval keeps its preparation, not its clone (the approved run clones)."""
    if not layout.out.exists():
        shutil.rmtree(layout.clone, ignore_errors=True)


def discard(layout: api.RunLayout) -> None:
    """A run that never started (superseded, cancelled while awaiting): its folder goes."""
    if not layout.out.exists():
        shutil.rmtree(layout.root, ignore_errors=True)
