"""The CLI's progress: rich rows (jobs.cli.ProgressView), one per phase, experiment and calibration; and
the plain lines of a piped run (jobs.run.progress_view.PlainView), which must never say what is not so."""
from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.progress import Progress

from jobs.cli import ProgressView
from jobs.contract import events as ev
from jobs.run.progress_view import PlainView
from summaries import run_summary


def rows(events: list[ev.Event]) -> list[str]:
    progress = Progress(console=Console(file=io.StringIO()))
    view = ProgressView(progress)
    for event in events:
        view(event)
    return [t.description for t in progress.tasks]


def test_one_row_per_calibration():
    single = rows([ev.Phase(phase="research"), ev.ResearchDone(hypotheses=["a"]),
                   ev.Phase(phase="calibrate", platform="local"),
                   ev.StepProgress(name="calibration", message="building", fraction=0.1),
                   ev.StepProgress(name="calibration", message="pair 3/8", fraction=0.5),
                   ev.Calibrated(platform="local", calibration={}),
                   ev.ExperimentStart(name="a"),
                   ev.ExperimentDone(name="a", status="keep", reason="")])
    assert single == ["research: 1 hypotheses", "calibrate: done", "a: keep"]
    two = rows([ev.Phase(phase="calibrate", platform="x86"),
                ev.StepProgress(name="calibration@x86", message="pair 1/8", fraction=0.1),
                ev.Calibrated(platform="x86", calibration={}),
                ev.Phase(phase="calibrate", platform="arm"),
                ev.StepProgress(name="calibration@arm", message="pair 1/8", fraction=0.1)])
    assert two == ["calibrate: done on x86", "calibration@arm: pair 1/8"]


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_per_phase_step_and_verdict_with_heartbeat_and_eta():
    out, clock = io.StringIO(), FakeClock()
    view = PlainView(out, heartbeat=60, clock=clock)
    view(ev.Phase(phase="research"))
    view(ev.StepProgress(name="research", message="profile build (instrumented copy)", fraction=0.0))
    clock.now += 125
    view.beat()                                   # a long silent step: one heartbeat line
    view(ev.ResearchDone(hypotheses=["a"]))
    view(ev.ExperimentStart(name="a"))
    view(ev.StepProgress(name="a", message="building baseline", fraction=0.0))
    clock.now += 10
    view(ev.StepProgress(name="a", message="pair 1/10", fraction=0.2))
    for i in range(2, 6):                         # pair lines are one step: throttled to the heartbeat
        clock.now += 20
        view(ev.StepProgress(name="a", message=f"pair {i}/10", fraction=0.2 + 0.08 * (i - 1)))
    view(ev.ExperimentDone(name="a", status="keep", reason="score +30%"))
    view.beat()                                   # nothing active: silent
    lines = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines[:3] == ["phase research", "research: profile build (instrumented copy)",
                         "research: profile build (instrumented copy) (step running 2m05s)"]
    assert lines[3:7] == ["research done: 1 hypotheses (a)", "experiment a: start", "a: building baseline",
                          "a: pair 1/10"]
    assert lines[7].startswith("a: pair 4/10 (step running 1m00s, at most ~") and "left at the pair cap" in lines[7]
    assert lines[8:] == ["experiment a: keep: score +30%"]
    assert out.getvalue().splitlines()[2].startswith("[ 2m05s] ")


def plain(events: list[ev.Event], clock: FakeClock, *, then_minutes: int = 0) -> tuple[list[str], PlainView]:
    """The PlainView's lines (without their time stamps) for `events`, then `then_minutes` minutes
    of heartbeats."""
    out = io.StringIO()
    view = PlainView(out, heartbeat=60, clock=clock)
    for event in events:
        clock.now += 5
        view(event)
    for _ in range(then_minutes):
        clock.now += 60
        view.beat()
    return [line.split("] ", 1)[1] for line in out.getvalue().splitlines()], view


def batch(name: str, n: int) -> list[ev.Event]:
    """One measured step as the runner reports it (jobs/measure/runner.py), then Measurer.execute's end."""
    return ([ev.StepProgress(name=name, message="building candidate", fraction=0.05)]
            + [ev.StepProgress(name=name, message=f"pair {i + 1}/{n}", fraction=0.2 + 0.8 * i / n)
               for i in range(n)]
            + [ev.StepProgress(name=name, message="measured (fixed)", fraction=1.0),
               ev.StepDone(name=name, status="ok")])


def test_no_step_reports_running_after_it_ended_including_the_second_calibration_batch():
    # The demo's piped log: `calibration-more: measured (fixed) (step running …)` once a minute
    # for 14 minutes after that batch had ended, because only `calibrated` cleared steps, by name.
    events = ([ev.Phase(phase="calibrate", platform="local")] + batch("calibration", 10)
              + batch("calibration-more", 10)
              + [ev.Calibrated(platform="local", calibration={}),
                 ev.Phase(phase="experiments", total=1),
                 ev.ExperimentStart(name="a"),
                 ev.StepProgress(name="a", message="pair 1/60", fraction=0.2)])
    lines, view = plain(events, FakeClock(), then_minutes=5)
    assert "calibration-more: measured (fixed)" in lines
    assert list(view.active) == ["a"]
    running = [line for line in lines if "step running" in line]
    assert running and all(line.startswith("a: pair 1/60 (step running") for line in running)


def test_a_step_ends_by_its_final_line_or_by_its_end_event_alone():
    clock = FakeClock()
    # Its final line (fraction 1.0) ends it, and a remote log's heartbeat repeating it is silent.
    lines, view = plain([ev.StepProgress(name="s", message="pair 1/4", fraction=0.2),
                         ev.StepProgress(name="s", message="measured (keep)", fraction=1.0),
                         ev.StepProgress(name="s", message="measured (keep)", fraction=1.0)],
                        clock, then_minutes=3)
    assert lines == ["s: pair 1/4", "s: measured (keep)"] and not view.active
    # A build that failed sends no final line: the end event retires it and says how it ended.
    lines, view = plain([ev.StepProgress(name="b", message="building candidate", fraction=0.05),
                         ev.StepDone(name="b", status="build_failed")], clock, then_minutes=3)
    assert lines == ["b: building candidate", "b: ended (build_failed)"] and not view.active


def test_the_rich_rows_finish_on_the_end_event():
    progress = Progress(console=Console(file=io.StringIO()))
    view = ProgressView(progress)
    for event in [ev.StepProgress(name="calibration-more", message="building candidate", fraction=0.05),
                  ev.StepDone(name="calibration-more", status="build_failed")]:
        view(event)
    assert [t.finished for t in progress.tasks] == [True]


def test_report_written_names_a_branch_only_when_one_was_left():
    # A run that kept nothing still names `autoresearch/<run-id>` in its summary, but deleted it.
    none_left = {"branch": "autoresearch/r1", "branch_left": False, "branch_note": "nothing was kept"}
    lines, _ = plain([ev.Done(run_summary(**none_left))], FakeClock())
    assert lines == ["report written: no branch left: nothing was kept"]
    lines, _ = plain([ev.Done(run_summary(**{**none_left, "branch_left": True, "branch_note": ""}))], FakeClock())
    assert lines == ["report written: branch autoresearch/r1"]


def test_every_measured_step_sends_its_end_however_it_ended(tmp_path):
    from types import SimpleNamespace

    from jobs.contract.errors import RunCancelled
    from jobs.run.measuring import Measurer
    from jobs.contract.runstate import RunState
    from jobs.contract.spec import RawResult
    events: list[ev.Event] = []
    bench = Measurer(None, "r1", RunState.load(tmp_path), None, events.append, lambda: False, platforms=1)

    class Failing:
        platform = "local"

        def run(self, spec, progress):
            progress("building candidate", 0.05)
            return RawResult(status="build_failed")

    class Cancelled(Failing):
        def run(self, spec, progress):
            raise RunCancelled("stop")

    assert bench.execute(Failing(), SimpleNamespace(name="calibration-more")).status == "build_failed"
    with pytest.raises(RunCancelled):
        bench.execute(Cancelled(), SimpleNamespace(name="x"))
    ends = [e for e in events if isinstance(e, ev.StepDone)]
    assert ends == [ev.StepDone(name="calibration-more", status="build_failed"),
                    ev.StepDone(name="x", status="cancelled")]
