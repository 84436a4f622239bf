"""Research before code: find where a target wastes memory passes, rank hypotheses.

Owns the recipes (`recipes`: declarative optimizations, their detection and their edits), the offline
scan, the gap scan, forks and papers, the op and callgrind profiles and the C/C++ library research.
May import `jobs.guard`, `jobs.contract`, `jobs.stats`, `jobs.measure` and `jobs.executors`.
"""
