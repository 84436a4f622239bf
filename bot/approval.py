"""Who may start spending, and the run's state machine. Pure: performs no I/O of its own.

Rules (issue #4):
- Write access or above on the repository — GitHub's collaborator-permission API reports
  `permission` as admin/write/read/none and `role_name` as admin/maintain/write/triage/read —
  or being listed in the config's `approvers` makes someone an *approver*.
- An approver's request within the policy starts at once; anyone else's is recorded as
  "awaiting approval" and starts nothing until an approver says `/autoresearch approve PLAN-ID`,
  naming the plan (its digest, shown in the plan comment); a bare or mismatched approve approves nothing.
- A pending plan is replaced (by a new `optimize`) only by its requester or an approver.
- A plan over the policy's budget always needs an explicit approve, even from an approver.
- An approval binds to the plan id and the base commit it was given for: if either has
  changed when the run is about to start, approval is needed again. The id (`plan_id`) covers
  every field of the plan, its repository and issue, and a random nonce stored with the plan.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})

AWAITING = "awaiting_approval"
QUEUED = "queued"
RUNNING = "running"
DONE = "done"
FAILED = "failed"
CANCELLED = "cancelled"
ACTIVE = frozenset({AWAITING, QUEUED, RUNNING})
FINAL = frozenset({DONE, FAILED, CANCELLED})

# state -> event -> next state; anything else is an InvalidTransition.
TRANSITIONS: dict[str, dict[str, str]] = {
    AWAITING: {"approve": QUEUED, "cancel": CANCELLED},
    QUEUED: {"start": RUNNING, "stale": AWAITING, "cancel": CANCELLED, "fail": FAILED},
    RUNNING: {"finish": DONE, "fail": FAILED, "cancel": CANCELLED, "cancelled": CANCELLED},
    DONE: {}, FAILED: {}, CANCELLED: {},
}


class InvalidTransition(ValueError):
    def __init__(self, state: str, event: str):
        super().__init__(f"cannot {event} a run that is {state.replace('_', ' ')}")
        self.state, self.event = state, event


def transition(state: str, event: str) -> str:
    try:
        return TRANSITIONS[state][event]
    except KeyError:
        raise InvalidTransition(state, event) from None


def is_approver(login: str, permission: str | None, role_name: str | None, approvers: list[str]) -> bool:
    """Write or above per the collaborator-permission API, or a configured approver."""
    if login and login.lower() in {a.lower() for a in approvers}:
        return True
    return (permission or "").lower() in WRITE_PERMISSIONS or (role_name or "").lower() in WRITE_PERMISSIONS


@dataclass(frozen=True)
class Approval:
    by: str
    plan_digest: str
    base_commit: str

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "Approval | None":
        return cls(d["by"], d["plan_digest"], d["base_commit"]) if d else None


@dataclass(frozen=True)
class ApprovalDecision:
    state: str
    approval: Approval | None
    reason: str


def decide_request(requester: str, requester_is_approver: bool, over_budget: bool,
                   plan_digest: str, base_commit: str) -> ApprovalDecision:
    """What an `optimize` request does: queue at once, or wait for an approver."""
    if over_budget:
        return ApprovalDecision(AWAITING, None, "the estimated cost is over the repository's budget: an approver must "
                        f"say `/autoresearch approve {plan_digest}`")
    if not requester_is_approver:
        return ApprovalDecision(AWAITING, None, f"@{requester} does not have write access: a maintainer or configured "
                        f"approver must say `/autoresearch approve {plan_digest}`")
    return ApprovalDecision(QUEUED, Approval(requester, plan_digest, base_commit), f"requested by @{requester}")


def decide_approve(state: str, approver: str, approver_ok: bool, plan_digest: str, base_commit: str) -> ApprovalDecision:
    """An `approve` comment: binds the approval to the plan shown and its base commit."""
    if not approver_ok:
        return ApprovalDecision(state, None, f"@{approver} may not approve runs (needs write access or a listing "
                        "in `approvers`)")
    nxt = transition(state, "approve")
    return ApprovalDecision(nxt, Approval(approver, plan_digest, base_commit), f"approved by @{approver}")


def plan_id(content: Mapping, nonce: str) -> str:
    """The id `approve` names: a digest of every field of the plan (`content`, plain data; see
    `bot.planning`) and of the random `nonce` stored with it. 16 hex digits (the grammar's)."""
    if not nonce:
        raise ValueError("a plan id needs the plan's nonce")
    blob = json.dumps({"plan": content, "nonce": nonce}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def may_start(approval: Approval | None, plan_digest: str, base_commit: str) -> bool:
    """True only if the approval was given for exactly this plan at exactly this commit."""
    return approval is not None and approval.plan_digest == plan_digest and approval.base_commit == base_commit


def may_cancel(login: str, requester: str, approver_ok: bool) -> bool:
    return approver_ok or login.lower() == (requester or "").lower()
