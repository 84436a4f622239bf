"""The contract and its records: what a repository asks for and what a run returns.

Owns the config (and its documentation, the command's overrides), the data model of results, the
experiment spec (with its stopping rule), the run's summary and ledger, its progress events,
METRIC parsing, the run folder's layout, branch names, the plan and the yardstick's files,
the errors a run raises. May import `jobs.guard` (safe reads, the operator's secrets policy), nothing above.
"""
