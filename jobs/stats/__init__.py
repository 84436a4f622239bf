"""The statistics: pure functions that turn measured pairs into decisions.

Owns the anytime-valid sequential test and its mean bounds, power and MDE, the verdicts (keep,
discard, invalid), the A/A calibration, carry-over and drift tests, integrity checks on what a
benchmark printed, and when the wall-clock guard's remaining pairs are not worth sampling. Pure
throughout; may import `jobs.contract` (the spec, config and model).
"""
