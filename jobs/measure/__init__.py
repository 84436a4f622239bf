"""Measuring: build both arms, run their benchmarks in pairs, count their simulated cycles.

Owns the on-machine runner (also the entry point on a cloud VM: `python -m jobs.measure.runner`),
the run's isolation (what a run is granted in the sandbox), build locations, the cachegrind
yardstick (its model, its runner side and the records it reads), the pair journal, and facts of
the machine. May import `jobs.guard`, `jobs.contract` and `jobs.stats`.
"""
