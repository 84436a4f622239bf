"""A run as the bot keeps it: one `RunRecord` per run, and its JSON form. Pure: performs no I/O.

The record is written when `optimize` plans a run and updated as the run goes (state, phase,
progress, cost, pull request). Stores keep it field by field (`to_fields`, `changes`,
`from_fields`): two writers that touch different fields of one run (the worker's progress, a
cancel's message) never overwrite each other. A field name that is not a field is an error.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from jobs.contract.config import Overrides

from .approval import Approval


class RecordError(ValueError):
    """A stored run record that does not read as one (a field missing or unknown)."""


@dataclass
class RunRecord:
    # what was asked, where, by whom
    run_id: str
    repo: str                             # owner/name
    owner: str
    name: str
    installation_id: int                  # 0 in the Action (it has a token, not an installation)
    issue: int
    default_branch: str
    requester: str
    overrides: Overrides
    # the plan, and who approved it
    base_commit: str
    plan_digest: str                      # the plan id `approve` names (`bot.planning.plan_id`)
    plan_text: str
    over_budget: bool
    state: str                            # bot.approval's states
    approvers: list[str] = field(default_factory=list)
    n_hypotheses: int = 0
    candidates: list[str] = field(default_factory=list)
    approval: Approval | None = None
    plan_nonce: str = ""                  # the random part of the plan id, kept with the plan
    wall_hours: float = 4.0
    # progress
    phase: str = "planned"
    phase_detail: str = ""
    platforms: list[str] = field(default_factory=list)
    experiments_done: int = 0
    experiments_total: int | None = None
    best: str = ""
    warnings: list[str] = field(default_factory=list)      # the run's warnings so far, newest last (the last 5)
    cost_usd: float = 0.0
    message: str = ""
    # where it runs, and what it left behind
    jobs: list[str] = field(default_factory=list)          # RQ job ids (the App)
    workflow_run_id: str = ""                              # the workflow run (the Action)
    worker: str = ""                                       # who holds the run's lease (the App: host:pid)
    lost_at: float = 0.0                                   # when its worker was found gone; 0 once resumed
    losses: int = 0                                        # how many of its workers were lost
    status_comment_id: int | None = None
    pr_url: str = ""
    pr_number: int | None = None
    created: float = 0.0


@dataclass(frozen=True)
class IssuePR:
    """The draft pull request a run opened for an issue: a later run on the issue updates it (its
    branch is pushed again) instead of opening another."""
    number: int
    url: str
    branch: str

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "url": self.url, "branch": self.branch}

    @classmethod
    def from_dict(cls, data: Any) -> IssuePR | None:
        """The stored form back; None for what is not one (absent, or another shape: then a new PR is
        opened rather than a wrong one updated)."""
        try:
            return cls(int(data["number"]), str(data.get("url", "")), str(data["branch"]))
        except (TypeError, KeyError, ValueError, AttributeError):
            return None


FIELDS = frozenset(f.name for f in fields(RunRecord))
REQUIRED = frozenset(f.name for f in fields(RunRecord) if f.default is MISSING and f.default_factory is MISSING)


def _encode(name: str, value: Any) -> Any:
    if name == "overrides":
        return value.to_dict() if isinstance(value, Overrides) else Overrides.from_dict(value).to_dict()
    if name == "approval":
        return value.to_dict() if isinstance(value, Approval) else value
    if isinstance(value, tuple):
        return list(value)
    return value


def _decode(name: str, value: Any) -> Any:
    if name == "overrides":
        return Overrides.from_dict(value)
    if name == "approval":
        return Approval.from_dict(value)
    return value


def changes(**values: Any) -> dict[str, Any]:
    """Field updates in their JSON form; an unknown name is an error, not a new key."""
    unknown = sorted(set(values) - FIELDS)
    if unknown:
        raise RecordError(f"not run record fields: {', '.join(unknown)}")
    return {k: _encode(k, v) for k, v in values.items()}


def to_fields(record: RunRecord) -> dict[str, Any]:
    return {f.name: _encode(f.name, getattr(record, f.name)) for f in fields(RunRecord)}


def from_fields(data: dict[str, Any]) -> RunRecord:
    missing = sorted(REQUIRED - set(data))
    if missing:
        raise RecordError(f"run record {data.get('run_id', '?')!r} lacks {', '.join(missing)}")
    return RunRecord(**{k: _decode(k, v) for k, v in data.items() if k in FIELDS})
