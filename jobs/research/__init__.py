"""Research before code: find where a target wastes memory passes, rank hypotheses."""
