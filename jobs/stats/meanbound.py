"""The pieces of the mean's time-uniform lower bound (`jobs.stats.sequential.mean_lower_bounds`): the
normal-mixture boundary's width and the winsorised mean and spread of every prefix of a run's
pairs. Pure: numpy only. Apart from `sequential` so that module stays one reading's length.
"""
from __future__ import annotations

import functools
import math

import numpy as np

MIN_SCALE = 0.002        # log units: noise below 0.2% is never taken as known
MEAN_REACH = 5.0         # robust scales from the median beyond which a pair counts as that far in the mean bound


@functools.lru_cache(maxsize=4096)
def mixture_width(n: int, alpha: float, t0: float = 20.0) -> float:
    """Half-width, in standard deviations, of the normal-mixture boundary of a mean after `n`
    observations, valid at every n at once at level `alpha` per side (Robbins' mixture; as an
    asymptotic confidence sequence in Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas, "Time-uniform
    central limit theory", 2024), tightest near `t0` pairs, where keeps are usually decided."""
    rho2 = (-2 * math.log(alpha) + math.log(-2 * math.log(alpha) + 1)) / t0
    return math.sqrt(2 * (n * rho2 + 1) / (n * n * rho2) * math.log(math.sqrt(n * rho2 + 1) / alpha))


def winsorised(values: np.ndarray) -> tuple[float, float]:
    """Mean and sd of `values` winsorised at MEAN_REACH robust scales (MAD) around their median.
    (The MAD only sets how far the reach goes: with slow states it can be half the gap between two
    modes, far above the spread of what is left after winsorising.)"""
    mean, sd = winsorised_prefixes(np.asarray(values, float)[None, :], np.array([values.size]))
    return float(mean[0, 0]), float(sd[0, 0])


def winsorised_prefixes(rows: np.ndarray, ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`winsorised(row[:n])` for every row of `rows` and every n in `ns` (each >= 2) at once,
    shape (rows, len(ns)): one slice per prefix, the pairs past it masked out. The power
    simulation asks for every prefix of hundreds of paths; one call per prefix made the A/A
    calibration of a small target spend 25 s here."""
    mask = np.arange(rows.shape[1])[None, :] < ns[:, None]             # (len(ns), n)
    values = np.where(mask, rows[:, None, :], np.nan)                  # (rows, len(ns), n)
    centre = _prefix_median(values, ns)
    scale = np.maximum(MIN_SCALE, 1.4826 * _prefix_median(np.abs(values - centre[..., None]), ns))
    w = np.clip(values, (centre - MEAN_REACH * scale)[..., None], (centre + MEAN_REACH * scale)[..., None])
    w = np.where(mask, w, 0.0)
    mean = w.sum(axis=-1) / ns
    var = np.where(mask, (w - mean[..., None]) ** 2, 0.0).sum(axis=-1) / (ns - 1)
    return mean, np.maximum(np.sqrt(var), MIN_SCALE)


def _prefix_median(values: np.ndarray, ns: np.ndarray) -> np.ndarray:
    """Median of the first `ns[i]` entries along the last axis of slice i (the rest are NaN,
    which sorts last)."""
    ordered = np.sort(values, axis=-1)
    low = np.take_along_axis(ordered, np.broadcast_to(((ns - 1) // 2)[:, None], ordered.shape[:-1] + (1,)), -1)
    high = np.take_along_axis(ordered, np.broadcast_to((ns // 2)[:, None], ordered.shape[:-1] + (1,)), -1)
    return ((low + high) / 2)[..., 0]
