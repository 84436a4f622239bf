"""The pieces of the mean's time-uniform lower bound (`jobs.sequential.mean_lower_bounds`): the
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
    mean, sd = winsorised_prefixes(np.asarray(values, float), np.array([values.size]))
    return float(mean[0]), float(sd[0])


def winsorised_prefixes(y: np.ndarray, ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`winsorised(y[:n])` for every n in `ns` (each >= 2) at once: one row per prefix, the pairs
    past it masked out. The power simulation asks for every prefix of thousands of paths; one
    call per prefix made the A/A calibration of a small target spend 30 s here."""
    mask = np.arange(y.size)[None, :] < ns[:, None]                     # (len(ns), len(y))
    values = np.where(mask, y[None, :], np.nan)
    centre = _prefix_median(values, ns)
    scale = np.maximum(MIN_SCALE, 1.4826 * _prefix_median(np.abs(values - centre[:, None]), ns))
    w = np.clip(values, (centre - MEAN_REACH * scale)[:, None], (centre + MEAN_REACH * scale)[:, None])
    w = np.where(mask, w, 0.0)
    mean = w.sum(axis=1) / ns
    var = np.where(mask, (w - mean[:, None]) ** 2, 0.0).sum(axis=1) / (ns - 1)
    return mean, np.maximum(np.sqrt(var), MIN_SCALE)


def _prefix_median(values: np.ndarray, ns: np.ndarray) -> np.ndarray:
    """Row-wise median of the first `ns[i]` entries of row i (the rest are NaN, sorted last)."""
    ordered = np.sort(values, axis=1)
    rows = np.arange(ns.size)
    return (ordered[rows, (ns - 1) // 2] + ordered[rows, ns // 2]) / 2
