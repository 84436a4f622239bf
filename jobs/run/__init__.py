"""The run: research, calibrate, experiments, stack, report, and what the fronts call.

Owns the pipeline and one module per role (research phase, calibrating, measuring, stacking,
reporting), the run's state and files, its lock and the process reaper, the calibration cache,
the preparation a plan is approved on, preflight checks, cleanup, the dry run and the progress
view. May import every package of `jobs`; only `jobs.api` and `jobs.cli` stand above it.
"""
