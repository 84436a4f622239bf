"""Roofline for batch-1 text generation. Pure apart from `measure_bandwidth`.

Each generated token streams (roughly) every weight once, so bytes/s moved ~ model bytes x
tokens/s. Compared with the platform's memory bandwidth this says whether generation is
memory-bound: then removing memory passes (fusions) is the lever and SIMD tuning of the matmul is
noise; if it is far below the roof, compute or overheads (threads, sync, dequantisation) are.
"""
from __future__ import annotations

from dataclasses import dataclass

MEMORY_BOUND_AT = 0.6    # >= 60% of the measured copy bandwidth: the roof is close


@dataclass
class Roofline:
    model_bytes: float
    tokens_per_s: float
    bandwidth_gbs: float
    achieved_gbs: float
    fraction: float
    memory_bound: bool
    implication: str

    def summary(self) -> str:
        return (f"{self.model_bytes / 2**20:.0f} MiB x {self.tokens_per_s:.1f} tok/s = "
                f"{self.achieved_gbs:.1f} GB/s, {100 * self.fraction:.0f}% of the platform's "
                f"{self.bandwidth_gbs:.1f} GB/s: {'memory-bound' if self.memory_bound else 'not memory-bound'}. "
                f"{self.implication}")


def roofline(model_bytes: float, tokens_per_s: float, bandwidth_gbs: float) -> Roofline:
    if model_bytes <= 0 or tokens_per_s <= 0 or bandwidth_gbs <= 0:
        raise ValueError("model_bytes, tokens_per_s and bandwidth_gbs must all be positive")
    achieved = model_bytes * tokens_per_s / 1e9
    fraction = achieved / bandwidth_gbs
    bound = fraction >= MEMORY_BOUND_AT
    if bound:
        why = ("Generation streams the weights at close to DRAM speed: fusions that remove whole memory "
               "passes (norms, softmax, element-wise chains) are the lever; SIMD micro-tuning of the "
               "matmul is expected to be noise.")
    else:
        why = ("Generation runs well below the memory roof: compute, dequantisation, threading and "
               "synchronisation overheads leave room; parallelism and kernel work can pay off, "
               "fusions still help the non-matmul share.")
    return Roofline(model_bytes, tokens_per_s, bandwidth_gbs, achieved, fraction, bound, why)


# How much each kind of hypothesis is worth, given the verdict (multiplies the score).
KIND_FACTOR = {True: {"fusion": 1.3, "parallelism": 1.0, "micro": 0.5},
               False: {"fusion": 1.0, "parallelism": 1.2, "micro": 0.9}}


def adjust(score: float, kind: str, verdict: Roofline | None) -> float:
    if verdict is None:
        return score
    return round(score * KIND_FACTOR[verdict.memory_bound].get(kind, 1.0), 3)


def measure_bandwidth(repeats: int = 5) -> float:
    """This machine's copy bandwidth in GB/s (best of a few 32 MiB copies)."""
    from jobs.measure.runner import machine_probe
    return max(machine_probe() for _ in range(repeats))
