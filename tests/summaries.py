"""A `jobs.contract.runsummary.RunSummary` for tests of its readers: the fields a test names, neutral values
for the rest of what every summary has."""
from __future__ import annotations

from typing import Any

from jobs.contract.runsummary import RunSummary

NEUTRAL: dict[str, Any] = dict(run_id="r1", target="demo", repo="/x", base_commit="a" * 40, branch="autoresearch/r1",
                               platform="local", platforms=["local"], cpus={}, cpu="", machines={}, agent="none",
                               primary="speed", calibration={}, experiments=[])


def run_summary(**fields: Any) -> RunSummary:
    return RunSummary.from_json({**NEUTRAL, **fields})
