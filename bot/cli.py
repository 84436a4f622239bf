"""The `autoresearch` console script: the pipeline commands from jobs.cli plus bot commands
`serve` (the webhook app; gunicorn, or Flask's dev server with --dev) and `worker` (RQ)."""
from __future__ import annotations

import argparse
import sys

from jobs import cli as jobs_cli


def cmd_serve(args) -> int:
    from .app import create_app
    from .settings import Settings
    settings = Settings.from_env()
    if args.dev:
        create_app(settings).run(host=args.host, port=args.port, debug=False)
        return 0
    from gunicorn.app.base import BaseApplication

    class Gunicorn(BaseApplication):
        def load_config(self):
            for key, value in {"bind": f"{args.host}:{args.port}", "workers": args.workers,
                               "threads": args.threads, "worker_class": "gthread", "timeout": 30,
                               "accesslog": "-" if args.access_log else None, "loglevel": "info"}.items():
                self.cfg.set(key, value)

        def load(self):
            return create_app(settings)

    Gunicorn().run()
    return 0


def cmd_worker(args) -> int:
    from . import jobqueue
    from . import tasks  # noqa: F401  preload: every forked work horse starts warm (imports take ~2 s)
    from .settings import Settings
    from .store import connect
    settings = Settings.from_env()
    settings.private_key()          # fail at start, not at the first job
    jobqueue.configure(args.lease_seconds, args.sweep_seconds)     # the work horses inherit it
    # Runs whose worker died are found here: once now (a restarted worker's predecessor may be the
    # one that died), then every --sweep-seconds (see bot.jobqueue).
    sweeper = jobqueue.Sweeper(settings.redis_url)
    sweeper.sweep_once(reindex=True)
    sweeper.start()
    jobqueue.ignore_handover()
    worker = jobqueue.HandingOverWorker(args.queues or list(jobqueue.ALL), connection=connect(settings.redis_url),
                                        name=args.name or None)
    worker.sweeper = sweeper
    try:
        worker.work(burst=args.burst, with_scheduler=True)
    finally:
        sweeper.stop()
    return 0


def register(sub) -> None:
    """Add bot/ commands (serve, worker) to the parser."""
    serve = sub.add_parser("serve", help="the GitHub App webhook endpoint (gunicorn; --dev for Flask's server)")
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=2)
    serve.add_argument("--threads", type=int, default=8)
    serve.add_argument("--access-log", action="store_true")
    serve.add_argument("--dev", action="store_true", help="Flask's development server (single process)")
    serve.set_defaults(func=cmd_serve)

    worker = sub.add_parser("worker", help="an RQ worker for command and run jobs")
    worker.add_argument("--queues", nargs="*", help="queues in priority order (default: commands, runs)")
    worker.add_argument("--burst", action="store_true", help="exit when the queues are empty")
    worker.add_argument("--name")
    worker.add_argument("--lease-seconds", type=float, default=None,
                        help="a run's lease outlives its last heartbeat by this long (default 30)")
    worker.add_argument("--sweep-seconds", type=float, default=None,
                        help="how often to look for runs whose worker died (default 10)")
    worker.set_defaults(func=cmd_worker)

    try:
        from .action import register as register_action
    except ModuleNotFoundError as exc:  # a core install (`make demo`): the bot extra is absent
        missing = sub.add_parser("action", help="the GitHub Action's entry point (needs the bot extra)")
        missing.add_argument("rest", nargs=argparse.REMAINDER)
        missing.set_defaults(func=lambda args, exc=exc: (_ for _ in ()).throw(exc))
    else:
        register_action(sub)        # `autoresearch action`: the GitHub Action's entry point


def main(argv: list[str] | None = None) -> int:
    from .settings import SettingsError
    try:
        return jobs_cli.main(argv, extend=register)
    except SettingsError as exc:
        print(f"autoresearch: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
