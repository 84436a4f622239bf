"""The CLI's progress rows (jobs.cli.ProgressView): one row per phase and experiment, one per calibration."""
from __future__ import annotations

import io

from rich.console import Console
from rich.progress import Progress

from jobs.cli import ProgressView


def rows(events: list[dict]) -> list[str]:
    progress = Progress(console=Console(file=io.StringIO()))
    view = ProgressView(progress)
    for event in events:
        view(event)
    return [t.description for t in progress.tasks]


def test_one_row_per_calibration():
    single = rows([{"type": "phase", "phase": "research"}, {"type": "research_done", "hypotheses": ["a"]},
                   {"type": "phase", "phase": "calibrate", "platform": "local"},
                   {"type": "progress", "name": "calibration", "message": "building", "fraction": 0.1},
                   {"type": "progress", "name": "calibration", "message": "pair 3/8", "fraction": 0.5},
                   {"type": "calibrated", "platform": "local", "calibration": {}},
                   {"type": "experiment_start", "name": "a"},
                   {"type": "experiment_done", "name": "a", "status": "keep", "reason": ""}])
    assert single == ["research: 1 hypotheses", "calibrate: done", "a: keep"]
    two = rows([{"type": "phase", "phase": "calibrate", "platform": "x86"},
                {"type": "progress", "name": "calibration@x86", "message": "pair 1/8", "fraction": 0.1},
                {"type": "calibrated", "platform": "x86", "calibration": {}},
                {"type": "phase", "phase": "calibrate", "platform": "arm"},
                {"type": "progress", "name": "calibration@arm", "message": "pair 1/8", "fraction": 0.1}])
    assert two == ["calibrate: done on x86", "calibration@arm: pair 1/8"]
