"""Load benchmark for the webhook endpoint (not a test): N signed deliveries at a fixed rate
against the app served by gunicorn on loopback; prints METRIC lines.

    python -m bot.loadbench --n 3000 --rate 100

It starts its own redis-server (unless --redis-url) and `autoresearch serve` (gunicorn) on free
loopback ports, sends open-loop (every delivery at its scheduled time, latency measured from
that time, so a stalled server cannot hide its backlog), then checks Redis: every acknowledged
delivery must be recorded and every command delivery enqueued exactly once.
METRICs: ack_p50_ms, ack_p99_ms, ack_max_ms, lost_deliveries, non_2xx, achieved_rps.
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
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="ar-loadbench-"))
    procs: list[subprocess.Popen] = []
    try:
        if args.redis_url:
            redis_url = args.redis_url
        else:
            rport = free_port()
            procs.append(subprocess.Popen([shutil.which("redis-server") or "redis-server", "--port", str(rport),
                                           "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                           "--dir", str(tmp)], stdout=subprocess.DEVNULL))
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
        time.sleep(1.0)     # let every gunicorn worker boot

        bodies = [(payload(i, i % round(1 / args.command_share) == 0 if args.command_share else False))
                  for i in range(args.n)]
        commands = sum(1 for i in range(args.n) if args.command_share and i % round(1 / args.command_share) == 0)
        latencies: list[float] = []
        statuses: dict[int, int] = {}
        failures: list[str] = []
        lock = threading.Lock()

        def send(i: int, due: float) -> None:
            body = bodies[i]
            headers = {"Content-Type": "application/json", "X-GitHub-Event": "issue_comment",
                       "X-GitHub-Delivery": str(uuid.UUID(int=i + 1)),
                       "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()}
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)   # GitHub: one connection each
                conn.request("POST", "/webhook", body=body, headers=headers)
                status = conn.getresponse().status
                conn.close()
            except OSError as exc:
                with lock:
                    failures.append(str(exc))
                return
            done = time.perf_counter()
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
                latencies.append(done - due)

        start = time.perf_counter() + 0.2
        with ThreadPoolExecutor(max_workers=64) as pool:
            for i in range(args.n):
                due = start + i / args.rate
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                pool.submit(send, i, due)
        wall = time.perf_counter() - start

        acked = sum(v for k, v in statuses.items() if 200 <= k < 300)
        recorded = sum(1 for _ in r.scan_iter("ar:delivery:*", count=1000))
        from rq import Queue
        from bot.jobqueue import COMMANDS
        enqueued = Queue(COMMANDS, connection=r).count
        lost = args.n - min(acked, recorded)
        lat = sorted(latencies)
        pct = lambda q: 1000 * lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")  # noqa: E731
        print(f"# {args.n} deliveries at {args.rate:g}/s, gunicorn {args.workers}x{args.threads} gthread, "
              f"{os.cpu_count()} CPUs; statuses {dict(sorted(statuses.items()))}; connection failures "
              f"{len(failures)}; recorded {recorded}; commands enqueued {enqueued}/{commands}")
        print(f"METRIC ack_p50_ms={pct(0.50):.2f}")
        print(f"METRIC ack_p99_ms={pct(0.99):.2f}")
        print(f"METRIC ack_max_ms={1000 * lat[-1] if lat else float('nan'):.2f}")
        print(f"METRIC lost_deliveries={lost}")
        print(f"METRIC non_2xx={args.n - acked}")
        print(f"METRIC commands_enqueued_diff={enqueued - commands}")
        print(f"METRIC achieved_rps={len(lat) / wall:.1f}")
        return 0
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
