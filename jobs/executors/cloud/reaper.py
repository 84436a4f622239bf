"""`autoresearch reap`: down every cluster of this app that no live run owns.

A cluster is this app's when its name starts with `autoresearch-` (every cluster the SkyPilot
executor starts is named `autoresearch-<run>-<experiment>-<platform>-<n>`); it is owned when its
name starts with the prefix of a live run's lease (see `jobs.executors.cloud.leases`). Everything else with
the app's prefix is an orphan — a killed worker, a teardown that failed — and is downed.
`dry_run` lists what would be downed and touches nothing.

It speaks to SkyPilot through the same SDK calls as the executor (`sky.status`, `sky.down`,
`sky.get`), so tests run it against the same fake.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.executors.cloud import APP_PREFIX
from jobs.executors.cloud.leases import DEFAULT_TTL_S, live_prefixes


@dataclass
class ReapReport:
    clusters: list[str] = field(default_factory=list)      # every cluster with the app prefix
    owned: list[str] = field(default_factory=list)          # kept: a live run owns them
    orphans: list[str] = field(default_factory=list)        # downed (or would be, on a dry run)
    failed: dict[str, str] = field(default_factory=dict)    # down failed: cluster -> error
    dry_run: bool = False


def _name(record: Any) -> str:
    return record["name"] if isinstance(record, dict) else getattr(record, "name")


def app_clusters(sky, prefix: str = APP_PREFIX) -> list[str]:
    records = sky.get(sky.status(cluster_names=None, all_users=False))
    return sorted(n for n in map(_name, records) if n.startswith(prefix + "-"))


def _sdk():
    import sky
    return sky


def reap(sky=None, *, lease_dir: Path | str | None = None, ttl_s: float = DEFAULT_TTL_S,
         dry_run: bool = False, prefix: str = APP_PREFIX, now: float | None = None) -> ReapReport:
    from sky import exceptions
    sky = sky if sky is not None else _sdk()
    report = ReapReport(clusters=app_clusters(sky, prefix), dry_run=dry_run)
    live = live_prefixes(lease_dir, ttl_s=ttl_s, now=now)
    for name in report.clusters:
        (report.owned if any(name.startswith(p) for p in live) else report.orphans).append(name)
    if dry_run:
        return report
    for name in report.orphans:
        try:
            sky.get(sky.down(name))
        except exceptions.ClusterDoesNotExist:
            pass                                    # gone already (autostop got there first)
        except Exception as exc:                    # keep going: one stuck cluster must not shield others
            report.failed[name] = f"{type(exc).__name__}: {exc}"
    return report


def cli_reap(args, echo=print) -> int:
    """`autoresearch reap [--dry-run] [--lease-dir DIR] [--ttl S]`: 0 when nothing is left
    orphaned, 1 when a teardown failed, 2 when SkyPilot is not installed."""
    try:
        report = reap(lease_dir=args.lease_dir, ttl_s=args.ttl, dry_run=args.dry_run)
    except ImportError as exc:
        echo(f"autoresearch reap needs the cloud extra (pip install 'autoresearch[cloud]'): {exc}")
        return 2
    echo(f"{len(report.clusters)} {APP_PREFIX} cluster(s): {len(report.owned)} owned by a live run, "
         f"{len(report.orphans)} orphaned")
    for name in report.owned:
        echo(f"  keep  {name}")
    for name in report.orphans:
        verb = "would down" if report.dry_run else ("FAILED" if name in report.failed else "downed")
        echo(f"  {verb}  {name}" + (f": {report.failed[name]}" if name in report.failed else ""))
    return 1 if report.failed else 0
