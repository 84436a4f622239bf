"""Cloud machines for experiments: SkyPilot tasks, their price catalog, and the reaper.

- `catalog`: the shipped SkyPilot catalog (`data/aws/vms.csv`, SkyPilot's own v8 format) for the
  instance types autoresearch uses, the hourly prices read from it, and a SkyPilot home pointed at
  it so task validation works offline.
- `tasks`: an ExperimentSpec rendered as one declarative SkyPilot task (name, workdir, setup, run,
  envs, resources), plus the workdir it ships (target bundle, the `jobs` package, spec.json).
- `leases` and `reaper`: which clusters a live run still owns, and `autoresearch reap` for the rest.

The executor itself is `jobs.executors.skypilot`; the `--dry-run` preview is `jobs.run.dryrun` (above the
pipeline, so nothing here imports upwards). Every cluster this app starts is named
`autoresearch-<run id>-<experiment>-<platform>-<n>`; the reaper only ever touches that prefix.
"""
from __future__ import annotations

APP_PREFIX = "autoresearch"
