"""Pure: what an A/A calibration fixed, typed: `MetricCalibration` (one metric on one platform) and
`SimulatedCalibration` (the simulated yardstick's A/A on one platform).

This module owns the two types and their JSON form, nothing else: `jobs.stats.calibration` produces
`MetricCalibration`s, `jobs.run.calibrating` the `SimulatedCalibration`, and every later reader (the
verdict's plan, the report, the CLI, the dashboard) reads their attributes. They travel per platform
(and per metric name) in `RunState.calibration` / `RunState.simulate` (state.json), in
`RunSummary` (summary.json), `CalibrationOnly` and the calibration cache.

`from_json` / `to_json` read and write exactly the objects earlier versions wrote, so a run resumes
across versions: a loaded object writes back the keys it was read with, in their order, values
untouched; keys this version does not know are kept in `extra` and written back; a key not there
takes the default its readers always took (the shared helpers: `jobs.contract.jsonform`).
`metric_calibrations` / `simulated_calibrations` (and their `_json` inverses) convert a whole
per-platform mapping, accepting typed values as they are.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from jobs.contract.jsonform import Json, JsonRecord, per_key, per_key_json


@dataclass
class MetricCalibration(JsonRecord):
    """One metric's A/A calibration on one platform (`jobs.stats.calibration.calibrate_metric`).
    A field is None where an older or stored file has no such key (or JSON has no such number:
    summary.json writes an infinite MDE as null)."""
    ok: bool = True
    n_pairs: int | None = None
    sd_log: float | None = None              # robust per-pair noise (log units, ~ CV of the ratio)
    aa_delta_pct: float | None = None        # Hodges-Lehmann estimate between the two identical arms
    aa_p_value: float | None = None          # exact signed-rank test of "the identical arms are equal"
    order_effect_pct: float | None = None    # how much faster the second process of a pair ran (mean)
    drift: bool = False                      # the order effect is significant (adjusted for in every pair)
    drift_note: str = ""
    floor_pct: float | None = None           # None: the config's min_effect_pct stands
    target_pct: float | None = None
    alpha_first: float | None = None         # keep level of the run's first experiment slot
    mde_pct: float | None = None             # improvement kept with 80% probability at alpha_first
    mean_pairs_at_mde: float | None = None
    mean_pairs_null: float | None = None     # pairs a no-change candidate costs on average
    false_win_rate: float | None = None      # simulated P(keep | no change) at alpha_first, on this noise
    repeats: int | None = None               # most pairs per experiment
    adjust: list[str] = field(default_factory=list)    # nuisances every experiment adjusts for
    prior: list[list[float]] = field(default_factory=list)   # the A/A pairs [y, z...]
    flags: list[str] = field(default_factory=list)
    note: str = ""
    floor_raise_pct: float = 0.0             # how far the A/A bias's one-sided 95% upper bound raised the floor
    # -- bookkeeping, not in the file ------------------------------------------------------------------
    extra: Json = field(default_factory=dict, repr=False)         # keys this version does not know, kept
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)   # as loaded; None: built here


@dataclass
class SimulatedCalibration(JsonRecord):
    """The simulated yardstick's A/A on one platform (`jobs.run.calibrating`; read by
    `jobs.measure.simulate` and the run's plan)."""
    aa_delta_pct: float | None = None        # the two builds' difference in simulated cycles
    base_cycles: int | None = None           # simulated cycles per run of the base (None: no comparison)
    digests: list[str] | None = None         # DIGEST names found deterministic; None: every name (older file)
    seconds: float | None = None             # one simulated run's wall time
    native_seconds: float | None = None      # the same workload run natively
    separate_build: bool = False             # the workload runs a build of its own (`simulate.separate_build`)
    derived: bool = False                    # the benchmark command itself, no `simulate:` workload
    command: str | None = None               # a derived yardstick's command (written only when derived)
    timeout: float | None = None             # and its time limit
    # -- bookkeeping, not in the file ------------------------------------------------------------------
    extra: Json = field(default_factory=dict, repr=False)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    _OPTIONAL = ("command", "timeout")       # written when set (a derived yardstick's), or when loaded


def metric_calibrations(data: Mapping[str, Mapping[str, Any]] | None) -> dict[str, MetricCalibration]:
    """metric name -> its calibration, from the JSON form (a typed value is taken as it is)."""
    return per_key(MetricCalibration, data)


def platform_calibrations(data: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, MetricCalibration]]:
    """platform -> metric name -> its calibration (state.json's and summary.json's `calibration`)."""
    return {platform: metric_calibrations(cal) for platform, cal in (data or {}).items()}


def platform_calibrations_json(value: Mapping[str, Mapping[str, MetricCalibration]]) -> Json:
    return {platform: per_key_json(cal) for platform, cal in value.items()}


def simulated_calibrations(data: Mapping[str, Any] | None) -> dict[str, SimulatedCalibration] | None:
    """platform -> the simulated yardstick's A/A (state.json's `simulate`; None stays None)."""
    return None if data is None else per_key(SimulatedCalibration, data)


def simulated_calibrations_json(value: Mapping[str, SimulatedCalibration] | None) -> Json | None:
    return None if value is None else per_key_json(value)
