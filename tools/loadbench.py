"""Load benchmark for the webhook endpoint (not a test, not shipped: run from a checkout of this
repository, with the bot extra installed): N signed deliveries at a fixed rate
against the app served by gunicorn on loopback; prints METRIC lines.

    python -m tools.loadbench --n 3000 --rate 100                     # steady load
    python -m tools.loadbench --n 600 --rate 20 --stall-redis 12      # Redis SIGSTOPped for 12 s
    python -m tools.loadbench --n 20 --rate 2 --slow-bodies 16        # the slow-body attack, app alone
    python -m tools.loadbench --n 20 --rate 2 --slow-bodies 16 --proxy nginx   # ... behind deploy/nginx

It starts its own redis-server (unless --redis-url) and `autoresearch serve` (gunicorn) on free
loopback ports, and with `--proxy nginx` the deploy's nginx in front (tools.frontdoor). It sends
open-loop (every delivery at its scheduled time, latency measured from that time, so a stalled
server cannot hide its backlog), one connection per delivery with GitHub's 10 s timeout, then checks
Redis: every acknowledged delivery must be recorded and every command delivery enqueued exactly once.
With `--stall-redis S`, Redis is stopped (SIGSTOP) `--stall-at` seconds in for S seconds, and every
delivery that was not acknowledged is redelivered afterwards with its delivery id, as GitHub does.
With `--slow-bodies K`, K connections first announce a 20 MB body and send it at 1 byte / 2 s.
METRICs: ack_p50_ms, ack_p99_ms, ack_max_ms, answered (2xx within the timeout), lost_deliveries, non_2xx,
commands_lost, commands_enqueued_diff, achieved_rps.
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SECRET = "loadbench-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def payload(i: int, command: bool) -> bytes:
    """An issue_comment.created delivery of realistic size (~6 KB, like GitHub's)."""
    user = {"login": f"user{i % 50}", "id": 1000 + i % 50, "type": "User", "site_admin": False,
            **{f"{k}_url": f"https://api.github.com/users/user{i % 50}/{k}" for k in
               ("followers", "following", "gists", "starred", "subscriptions", "organizations", "repos",
                "events", "received_events")}}
    repo = {"id": 1, "name": "widget", "full_name": "octo/widget", "owner": {**user, "login": "octo"},
            "default_branch": "main", "private": False,
            **{f"{k}_url": f"https://api.github.com/repos/octo/widget/{k}" for k in
               ("archive", "assignees", "blobs", "branches", "collaborators", "comments", "commits", "compare",
                "contents", "contributors", "deployments", "downloads", "events", "forks", "git_commits",
                "git_refs", "git_tags", "issue_comment", "issue_events", "issues", "keys", "labels", "languages",
                "merges", "milestones", "notifications", "pulls", "releases", "stargazers", "statuses")}}
    body = "/autoresearch status" if command else f"Thanks, looks good to me ({i})." + " lorem ipsum" * 40
    data = {"action": "created", "issue": {"number": 1 + i % 20, "title": "Speed up the CPU path", "user": user,
                                           "labels": [], "state": "open", "body": "x" * 500},
            "comment": {"id": 10_000_000 + i, "body": body, "user": user, "author_association": "NONE",
                        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
            "repository": repo, "sender": user, "installation": {"id": 77}}
    return json.dumps(data).encode()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--rate", type=float, default=100.0, help="deliveries per second")
    ap.add_argument("--command-share", type=float, default=0.2, help="share of deliveries carrying a command")
    ap.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    ap.add_argument("--threads", type=int, default=8, help="threads per gunicorn worker")
    ap.add_argument("--redis-url", help="use this Redis (its db is flushed!) instead of a private redis-server")
    ap.add_argument("--proxy", choices=("none", "nginx"), default="none", help="nginx: deploy/nginx in front")
    ap.add_argument("--slow-bodies", type=int, default=0, help="slow-body connections opened first")
    ap.add_argument("--stall-redis", type=float, default=0.0, help="seconds Redis is SIGSTOPped for")
    ap.add_argument("--stall-at", type=float, default=2.0, help="seconds into the run the stall starts")
    ap.add_argument("--timeout", type=float, default=10.0, help="a delivery's timeout (GitHub's: 10 s)")
    args = ap.parse_args(argv)
    if args.stall_redis and args.redis_url:
        ap.error("--stall-redis needs the benchmark's own redis-server (no --redis-url)")

    tmp = Path(tempfile.mkdtemp(prefix="ar-loadbench-"))
    procs: list[subprocess.Popen] = []
    attack = None
    try:
        redis_proc = None
        if args.redis_url:
            redis_url = args.redis_url
        else:
            rport = free_port()
            redis_proc = subprocess.Popen([shutil.which("redis-server") or "redis-server", "--port", str(rport),
                                           "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                           "--dir", str(tmp)], stdout=subprocess.DEVNULL)
            procs.append(redis_proc)
            wait_port(rport)
            redis_url = f"redis://127.0.0.1:{rport}/0"
        import redis
        r = redis.Redis.from_url(redis_url)
        r.flushdb()
        key = tmp / "unused.pem"
        key.write_text("not used by `serve`\n")
        port = free_port()
        env = {**os.environ, "AUTORESEARCH_APP_ID": "1", "AUTORESEARCH_PRIVATE_KEY_PATH": str(key),
               "AUTORESEARCH_WEBHOOK_SECRET": SECRET, "AUTORESEARCH_REDIS_URL": redis_url}
        server = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port",
                                   str(port), "--workers", str(args.workers), "--threads", str(args.threads)],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(server)
        wait_port(port)
        if args.proxy == "nginx":
            from .frontdoor import start_nginx
            front = free_port()
            procs.append(start_nginx(tmp / "nginx", front, f"127.0.0.1:{port}"))
            wait_port(front)
            port = front
        time.sleep(1.0)     # let every gunicorn worker boot
        if args.slow_bodies:
            from .frontdoor import SlowBodies
            attack = SlowBodies(port, args.slow_bodies).start()

        every = round(1 / args.command_share) if args.command_share else 0
        is_command = [bool(every) and i % every == 0 for i in range(args.n)]
        bodies = [payload(i, is_command[i]) for i in range(args.n)]
        latencies: list[float] = []
        statuses: dict[int, int] = {}
        outcome: dict[int, int] = {}             # delivery -> status of its first try (0: no answer)
        lock = threading.Lock()

        def post(i: int) -> int:
            body = bodies[i]
            headers = {"Content-Type": "application/json", "X-GitHub-Event": "issue_comment",
                       "X-GitHub-Delivery": str(uuid.UUID(int=i + 1)),
                       "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()}
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=args.timeout)   # one each, as GitHub
                conn.request("POST", "/webhook", body=body, headers=headers)
                status = conn.getresponse().status
                conn.close()
                return status
            except OSError:
                return 0

        def send(i: int, due: float) -> None:
            status = post(i)
            done = time.perf_counter()
            with lock:
                outcome[i] = status
                if status:
                    statuses[status] = statuses.get(status, 0) + 1
                    latencies.append(done - due)

        def stall() -> None:
            time.sleep(args.stall_at)
            redis_proc.send_signal(signal.SIGSTOP)
            time.sleep(args.stall_redis)
            redis_proc.send_signal(signal.SIGCONT)

        start = time.perf_counter() + 0.2
        if args.stall_redis:
            staller = threading.Thread(target=stall, daemon=True)
            staller.start()
        with ThreadPoolExecutor(max_workers=64) as pool:
            for i in range(args.n):
                due = start + i / args.rate
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                pool.submit(send, i, due)
        wall = time.perf_counter() - start
        if args.stall_redis:
            staller.join()
        if attack is not None:
            attack.stop()
        answered = sum(1 for i, st in outcome.items() if 200 <= st < 300)
        within = sum(1 for t in latencies if t <= args.timeout)
        redelivered = [i for i, st in outcome.items() if not 200 <= st < 300] if args.stall_redis else []
        redelivery = {i: post(i) for i in redelivered}       # GitHub's redelivery, same delivery id

        acked = sum(1 for i, st in outcome.items() if 200 <= st < 300 or 200 <= redelivery.get(i, 0) < 300)
        recorded = sum(1 for _ in r.scan_iter("ar:delivery:*", count=1000))
        from rq import Queue
        from bot.jobqueue import COMMANDS
        jobs: dict[str, int] = {}
        for job in Queue(COMMANDS, connection=r).jobs:
            jobs[job.description] = jobs.get(job.description, 0) + 1
        wanted = {f"comment {10_000_000 + i}" for i in range(args.n) if is_command[i]}
        commands_lost = sum(1 for d in wanted if d not in jobs)
        enqueued = sum(jobs.values())
        lost = args.n - min(acked, recorded)
        lat = sorted(latencies)
        pct = lambda q: 1000 * lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")  # noqa: E731
        print(f"# {args.n} deliveries at {args.rate:g}/s, gunicorn {args.workers}x{args.threads} gthread"
              f"{' behind nginx' if args.proxy == 'nginx' else ''}, {os.cpu_count()} CPUs"
              f"{f'; {attack.open} slow-body connections' if attack else ''}"
              f"{f'; Redis stopped {args.stall_redis:g} s at {args.stall_at:g} s' if args.stall_redis else ''}; "
              f"statuses {dict(sorted(statuses.items()))}; no answer {sum(1 for s in outcome.values() if not s)}; "
              f"redelivered {len(redelivery)} -> {sorted(redelivery.values())}; recorded {recorded}; "
              f"commands enqueued {enqueued}/{len(wanted)}")
        print(f"METRIC ack_p50_ms={pct(0.50):.2f}")
        print(f"METRIC ack_p99_ms={pct(0.99):.2f}")
        print(f"METRIC ack_max_ms={1000 * lat[-1] if lat else float('nan'):.2f}")
        print(f"METRIC answered={min(answered, within)}")
        print(f"METRIC lost_deliveries={lost}")
        print(f"METRIC non_2xx={args.n - answered}")
        print(f"METRIC commands_lost={commands_lost}")
        print(f"METRIC commands_enqueued_diff={enqueued - len(wanted)}")
        print(f"METRIC achieved_rps={len(lat) / wall:.1f}")
        return 0
    finally:
        if attack is not None:
            attack.stop()
        for p in reversed(procs):
            p.send_signal(signal.SIGCONT)
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
