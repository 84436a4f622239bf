"""How the CLI shows a run's events: rich progress bars on a terminal, plain lines elsewhere.

Rich's live bars draw nothing when stdout is not a terminal (a CI log, `make demo > log`,
`nohup`): a run looked silent for half an hour. `PlainView` prints one line per phase, one per
experiment verdict, each change of step (building, checks, measuring), and, for a step that goes
on, a heartbeat with its elapsed time and, when the step reports how far it is, an ETA.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TextIO

from rich.progress import Progress

from jobs.contract import events
from jobs.contract.events import Event
from jobs.contract.runsummary import RunSummary


class ProgressView:
    """Renders pipeline events as rich progress bars: research, each experiment, the stack."""

    def __init__(self, progress: Progress):
        self.p = progress
        self.tasks: dict[str, int] = {}

    def _task(self, name: str, label: str | None = None) -> int:
        if name not in self.tasks:
            self.tasks[name] = self.p.add_task(label or name, total=1.0)
        return self.tasks[name]

    def __call__(self, event: Event) -> None:
        match event:
            case events.Phase(phase="research"):
                self._task("research", "research (scan + recipes)")
            case events.Phase(phase="calibrate", platform=platform):
                # One row per calibration: its progress events are named `calibration` (one platform)
                # or `calibration@<platform>`, and both land on the row made here.
                platform = platform or ""
                row = self._task(f"calibration@{platform}", "calibrate (A/A noise)"
                                 + (f" on {platform}" if platform and platform != "local" else ""))
                self.tasks["calibration"] = row
            case events.ResearchDone(hypotheses=hypotheses):
                self.p.update(self._task("research"), completed=1.0,
                              description=f"research: {len(hypotheses)} hypotheses")
            case events.Calibrated(platform=platform):
                self.p.update(self._task(f"calibration@{platform}"), completed=1.0,
                              description="calibrate: done" + (f" on {platform}" if platform not in
                                                               (None, "", "local") else ""))
            case events.ExperimentStart(name=name):
                self._task(name, f"experiment {name}")
            case events.StepProgress(name=name, message=message, fraction=fraction):
                task = self._task(name, name)
                self.p.update(task, completed=fraction, description=f"{name}: {message}")
            case events.StepDone(name=name):   # a measured step ended (a failed build sends no 1.0 itself)
                if name in self.tasks:
                    self.p.update(self.tasks[name], completed=1.0)
            case events.ExperimentDone(name=name, status=status, resumed=resumed):
                task = self._task(name, name)
                tag = " (resumed)" if resumed else ""
                self.p.update(task, completed=1.0, description=f"{name}: {status}{tag}")
            case events.RunWarning(message=message):
                self.p.console.print(f"[yellow]warning:[/] {message}")
            case events.Resume(phase=phase):
                self.p.console.print(f"resuming run at phase {phase}")

def duration(seconds: float) -> str:
    """`45s`, `3m05s`, `1h02m`."""
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def branch_line(summary: RunSummary) -> str:
    """What the run left, as the CLI's closing lines say it: a summary names its branch even when
    the branch was deleted (nothing kept), so `branch_left` decides, never the name alone."""
    if summary.branch_left and summary.branch:
        return f"branch {summary.branch}"
    return f"no branch left: {summary.branch_note or 'nothing was kept'}"

def step_of(message: str) -> str:
    """The step a progress message belongs to: `pair 3/20` and `pair 4/20` are one step."""
    return message.split(" ", 1)[0] if message.startswith("pair ") else message


class _Step:
    def __init__(self, message: str, fraction: float, now: float, task_started: float | None = None):
        self.message, self.fraction = message, fraction
        self.started = now                                   # when this step began
        self.task_started = now if task_started is None else task_started   # the ETA's origin
        self.printed = now                                   # when a line about it was last printed


class PlainView:
    """One plain line per event worth a log line; `heartbeat` seconds of silence on a step that is
    still running print one line about it. Call `close()` (or use it as a context manager)."""

    def __init__(self, stream: TextIO | None = None, heartbeat: float = 60.0,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream or sys.stdout
        self.heartbeat = heartbeat
        self.clock = clock
        self.started = clock()
        self.active: dict[str, _Step] = {}
        self.ended: dict[str, str] = {}          # name -> the last line of a step that finished
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    # -- output ------------------------------------------------------------------------------
    def line(self, text: str) -> None:
        stamp = duration(self.clock() - self.started)
        self.stream.write(f"[{stamp:>6}] {text}\n")
        self.stream.flush()

    def _status(self, name: str, st: _Step, now: float) -> str:
        text = f"{name}: {st.message} (step running {duration(now - st.started)}"
        if 0.2 < st.fraction < 1.0 and st.message.startswith("pair "):
            # The pair count is a cap: a sequential test usually stops sooner, so this is an upper bound.
            eta = (now - st.task_started) * (1 - st.fraction) / st.fraction
            text += f", at most ~{duration(eta)} left at the pair cap"
        return text + ")"

    # -- events ------------------------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        with self._lock:
            self._event(event)

    def _event(self, event: Event) -> None:
        now = self.clock()
        match event:
            case events.Phase(phase=phase, platform=platform, total=total):
                extra = f" on {platform}" if platform not in (None, "", "local") else ""
                self.line(f"phase {phase}{extra}" + (f" ({total} to do)" if total else ""))
                if phase == "research":
                    self.active["research"] = _Step("scan", 0.0, now)
            case events.StepProgress(name=name, message=message, fraction=fraction):
                if fraction >= 1.0 and self.ended.get(name) == message:
                    return                    # a remote log's heartbeat repeating a step's last line
                self.ended.pop(name, None)
                st = self.active.get(name)
                if st is None or step_of(st.message) != step_of(message):
                    self.active[name] = st = _Step(message, fraction, now, st.task_started if st else None)
                    self.line(f"{name}: {message}")
                    st.printed = now
                else:
                    st.message, st.fraction = message, fraction
                    if now - st.printed >= self.heartbeat:
                        self.line(self._status(name, st, now))
                        st.printed = now
                if fraction >= 1.0:           # the step says it is finished ("measured (...)"): retire it
                    self.active.pop(name, None)
                    self.ended[name] = message
            case events.StepDone(name=name, status=status):
                # Every measured step's explicit end (jobs.run.measuring.Measurer.execute), however it ended:
                # no step can go on "running" in the heartbeat because nobody cleared its name.
                if self.active.pop(name, None) is not None:   # it ended without a final line (a failed build)
                    self.line(f"{name}: ended ({status})")
            case events.ResearchDone(hypotheses=hypotheses):
                self.active.pop("research", None)
                self.line(f"research done: {len(hypotheses)} hypotheses"
                          + (f" ({', '.join(hypotheses)})" if hypotheses else ""))
            case events.Calibrated(platform=platform):   # its batches ended with their own StepDone events
                self.line("calibration done" + (f" on {platform}" if platform not in (None, "", "local") else ""))
            case events.ExperimentStart(name=name):
                self.active[name] = _Step("starting", 0.0, now)
                self.line(f"experiment {name}: start")
            case events.ExperimentDone(name=name, status=status, reason=reason, resumed=resumed):
                self.active.pop(name, None)
                tag = " (finished earlier; resumed)" if resumed else ""
                self.line(f"experiment {name}: {status}{tag}: {reason}")
            case events.RunWarning(message=message):
                self.line(f"warning: {message}")
            case events.Resume(phase=phase):
                self.line(f"resuming run at phase {phase}")
            case events.Done(summary=summary):
                self.line("report written: " + branch_line(summary))
            case events.Cancelled():
                self.line("cancelled")
    # -- heartbeat ---------------------------------------------------------------------------
    def beat(self) -> None:
        """One line per active step that printed nothing for `heartbeat` seconds."""
        with self._lock:
            now = self.clock()
            for name, st in self.active.items():
                if now - st.printed >= self.heartbeat:
                    self.line(self._status(name, st, now))
                    st.printed = now

    def __enter__(self) -> "PlainView":
        def loop() -> None:
            while not self._done.wait(min(10.0, self.heartbeat)):
                self.beat()
        self._thread = threading.Thread(target=loop, name="progress-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
