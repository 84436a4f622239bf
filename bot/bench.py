"""`/autoresearch bench` on an autoresearch pull request: re-measure its head against its base.

Only a pull request the bot opened qualifies: its author must be the bot's own login (a branch
named `autoresearch/...` proves nothing, a fork can push one).

The head is fetched from the repository the pull request says it lives in (`head.repo`), which is
where the run pushed it (the repository, the config's fork, or the app-wide fork) and where a
maintainer may have pushed more commits; never from a guess such as AUTORESEARCH_FORK_OWNER.
"""
from __future__ import annotations

import fcntl
import json
from pathlib import Path

from jobs import api
from jobs.api import ConfigError, RunError, is_run_made, scrub_environment, write_atomic
from jobs.guard.mdsafe import clip, code, md, prose, rendered, spans

from . import approval as ap
from .ports import BenchFlow, Outcome, PullRequest, Reply
from .routing import CommentCommand
from .status import login

COMMENT_LIMIT = 60000


def not_ours(pull: PullRequest, bot_login: str) -> str:
    """Why `pull` is not a pull request this bot opened, or ''. The branch name proves nothing
    (anyone can push `autoresearch/x` from a fork); the pull request's author does."""
    if not bot_login:
        return ("`bench` needs the App's own login to tell its pull requests apart (the operator sets "
                "AUTORESEARCH_BOT_LOGIN, e.g. `my-app[bot]`)")
    if (pull.author or "").lower() != bot_login.lower() or not is_run_made(pull.head_ref):
        return "`bench` re-measures pull requests autoresearch opened only (this one was not)"
    return ""


def bench_slot(root: Path, number: int, run_id: str) -> int:
    """The keep slot of bench `run_id` of pull request `number`, recorded under `root` (the
    repository's folder of the workdir): 1 + the distinct benches of that pull request started
    before it. Each bench re-tests the same question on fresh pairs; at slot 1 every time, N benches
    of a no-change candidate would keep it with probability up to N times the first slot's level.
    At slot k the levels alpha / (k * H_M) sum to at most alpha over all of them (slot_alpha); a
    resumed bench keeps its slot. The ledger is read and written under an exclusive lock: two
    workers starting benches of one pull request at once must not both read the same list and
    both take its next slot."""
    root.mkdir(parents=True, exist_ok=True)
    ledger = root / "benches.json"
    with open(root / "benches.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            seen = json.loads(ledger.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            seen = {}
        runs = list(seen.get(str(number), []))
        if run_id not in runs:
            runs.append(run_id)
            seen[str(number)] = runs
            write_atomic(ledger, json.dumps(seen))
    return runs.index(run_id) + 1


def level_note(experiments: list[api.ExperimentRecord], slot: int) -> str:
    """What the reply says about the level the bench kept at (from the run's own records)."""
    alphas = [e.alpha for e in experiments if e.alpha is not None]
    level = f"keep level {alphas[0]:.3g}" if alphas else "keep level: none measured"
    if alphas and alphas[0] == 0:
        level = "keep level 0: earlier benches of this pull request spent the run's whole alpha, so nothing can be kept"
    return (f"bench {slot} of this pull request, so keep slot {slot} of the run's family ({level}; "
            "all benches of it together keep a no-change candidate with probability at most the config's alpha)")


def published(clone_url: str, head_url: str, head_ref: str) -> api.Published:
    """Where a maintainer re-measures what the bench measured: the repository's URL and the pull
    request's head where it lives, never the worker's clone (its path means nothing to a reader).
    The head is the bench's candidate, so Reproduce measures it whether or not it was kept."""
    return api.Published(clone_url=clone_url, head_url=head_url, head_branch=head_ref, head_is_candidate=True)


def request(flow: BenchFlow, cmd: CommentCommand) -> Outcome:
    """The comment: check the pull request is the bot's (author and branch) and the commenter's
    permission, then queue the bench."""
    pull = flow.gh.pull(cmd.issue_number)
    why = not_ours(pull, flow.gh.bot_login)
    if why:
        raise Reply(md("autoresearch: {}; nothing was queued.\n", spans(why, at_start=False)))
    if not flow.is_approver(cmd.author, []):
        raise Reply(md("autoresearch: @{} may not start a bench (needs write access).\n", login(cmd.author)))
    flow.launcher.launch_bench(cmd)
    flow.gh.comment(cmd.issue_number, md("autoresearch: bench of {} against {} queued.\n", code(pull.head_sha[:12]),
                                         code(pull.base_sha[:12])))
    return Outcome("bench")


def run(flow: BenchFlow, cmd: CommentCommand) -> Outcome:
    """The job: one candidate, the pull request's diff, measured like a run's."""
    pull = flow.gh.pull(cmd.issue_number)
    why = not_ours(pull, flow.gh.bot_login)
    if why:                            # checked again by the job: it acts on what GitHub says now
        flow.gh.comment(cmd.issue_number, md("autoresearch: {}; the bench did not run.\n", spans(why, at_start=False)))
        return Outcome(ap.FAILED, message=why)
    layout = flow.layout(f"bench-{pull.number}-{pull.head_sha[:7]}")
    url = flow.place.clone_url(flow.gh.owner, flow.gh.repo)
    flow.git.checkout(url, layout.clone, pull.base_sha, flow.token, ref=pull.base_ref)
    head_owner, _, head_name = pull.head_repo.partition("/")
    head = flow.git.fetch_ref(flow.place.clone_url(head_owner, head_name), layout.clone, pull.head_ref, flow.token)
    patch = layout.root / f"{pull.head_ref.replace('/', '-')}.patch"
    patch.write_text(flow.git.diff(layout.clone, pull.base_sha, head) + "\n")
    slot = bench_slot(layout.root.parent, pull.number, layout.run_id)
    scrub_environment()
    try:
        prep = api.prepare_candidates(layout, pull.base_sha, [patch], flow.place.executor)
        summary = api.start(prep, executor=flow.place.executor, agent="none", slots_spent=slot - 1,
                            published=published(url, flow.place.clone_url(head_owner, head_name), pull.head_ref))
    except (RunError, ConfigError) as exc:
        flow.gh.comment(cmd.issue_number, md("autoresearch bench failed: {}\n", prose(str(exc), 1500)))
        return Outcome(ap.FAILED, layout.run_id, error=exc)
    report = rendered((layout.out / "pr.md").read_text(encoding="utf-8"))    # jobs.report.report's, as is
    body = md("autoresearch bench of {} against {} (run {}, cost {:.2f} USD; {}):\n\n{}", code(head[:12]),
              code(pull.base_sha[:12]), code(layout.run_id), getattr(summary, "cost_usd", 0.0),
              level_note(getattr(summary, "experiments", []), slot), report)
    flow.gh.comment(cmd.issue_number, clip(body, COMMENT_LIMIT))
    return Outcome(ap.DONE, layout.run_id, summary=summary, out=layout.out)
