"""The machine's noise as the run goes, not only as the A/A calibration saw it. Pure.

A calibration taken in a load spike (31.4% per pair, MDE 21%) used to govern a whole run although
the host quietened later, and one taken on a quiet host hid a busy afternoon. Within an experiment
the sequential test already adapts its scale to the pairs it sees; here the run follows too: every
experiment's primary-metric pairs, centred on their own median (so a real effect is not counted as
noise), join a pool of the most recent residuals, and the next experiments' MDE (what the report
calls "no detectable difference below x%") is computed from that pool once it holds enough pairs.
The test itself stays pre-registered: its priors and adjustments are the calibration's.
"""
from __future__ import annotations

import math
from statistics import median
from typing import Sequence

MIN_POOL = 8          # residuals needed before the pool stands in for the calibration's


def residuals(ys: Sequence[float]) -> list[float]:
    """One experiment's log ratios minus their median: its noise, with its effect taken out."""
    finite = [y for y in ys if math.isfinite(y)]
    if len(finite) < 2:
        return []
    mid = median(finite)
    return [y - mid for y in finite]


def scale_pct(values: Sequence[float]) -> float:
    """Robust noise per pair in percent (1.4826 x MAD of the log ratios), nan for fewer than 2."""
    if len(values) < 2:
        return math.nan
    mid = median(values)
    return 100.0 * (math.exp(1.4826 * median(abs(v - mid) for v in values)) - 1.0)


def pooled(pool: Sequence[float], new: Sequence[float], keep: int) -> list[float]:
    """The most recent `keep` residuals after adding `new`."""
    return (list(pool) + list(new))[-max(keep, MIN_POOL):]


def current(calibration: Sequence[float], pool: Sequence[float]) -> tuple[list[float], str]:
    """The residuals the next plan's MDE is computed from, and which they are."""
    if len(pool) >= MIN_POOL:
        return list(pool), "recent experiments"
    return list(calibration), "calibration"
