"""Accepting a routed command: replay checks, then dedupe and enqueue in one Redis transaction.

Why the comment and not only the delivery: a captured signed body resent with a new
`X-GitHub-Delivery` is a new delivery but the same comment. GitHub sends `issue_comment`
`created` once per comment, so the key is the comment id and the action; it lives as long as a
delivery id does (`AUTORESEARCH_DELIVERY_TTL`), and a comment older than that is refused outright
(`too_old`), so a replay after the key expired starts nothing either.

Why one transaction: with Redis hung (SIGSTOP, a failover), a dedupe key written by itself can land
after the webhook has already answered 503; GitHub's redelivery then looks like a duplicate and the
command is lost. Here the dedupe keys are WATCHed, checked, and written in the same MULTI/EXEC as the
RQ job (`Queue.enqueue_call(pipeline=...)`): both land or neither does, whenever Redis runs it.
"""
from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import redis

from . import jobqueue
from .routing import CommentCommand, field
from .store import delivery_key


def comment_key(command: CommentCommand, action: str = "created") -> str | None:
    """One key per comment and action; None when no comment carried the command."""
    return f"ar:comment:{command.comment_id}:{action}" if command.comment_id else None


def too_old(payload: Any, now: float, max_age: float) -> str | None:
    """Why the comment is too old (or undated) to act on, or None. Pure."""
    raw = field(payload, "comment", "created_at")
    try:
        created = datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp() if isinstance(raw, str) else None
    except ValueError:
        created = None
    if created is None:
        return "the comment has no valid created_at"
    if now - created > max_age:
        return f"the comment was created {int((now - created) // 3600)} h ago, past the replay window"
    return None


def accept(conn: redis.Redis, command: CommentCommand, delivery: str, ttl: int) -> str | None:
    """Enqueue `command` unless its delivery or its comment was seen; returns the job id, or None
    for a duplicate. Raises redis.RedisError if Redis cannot answer (then nothing was written,
    or, if Redis runs the transaction later, everything was)."""
    keys = [delivery_key(delivery)] + [k for k in (comment_key(command),) if k]
    with conn.pipeline() as pipe:
        while True:
            try:
                pipe.watch(*keys)
                if pipe.exists(*keys):
                    return None
                pipe.multi()
                for key in keys:
                    pipe.set(key, str(int(time.time())), ex=ttl)
                job_id = jobqueue.enqueue_command(conn, command, pipeline=pipe)
                pipe.execute()
                return job_id
            except redis.WatchError:       # a concurrent delivery of the same comment won: look again
                continue
