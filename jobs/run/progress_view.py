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


class ProgressView:
    """Renders pipeline events as rich progress bars: research, each experiment, the stack."""

    def __init__(self, progress: Progress):
        self.p = progress
        self.tasks: dict[str, int] = {}

    def _task(self, name: str, label: str | None = None) -> int:
        if name not in self.tasks:
            self.tasks[name] = self.p.add_task(label or name, total=1.0)
        return self.tasks[name]

    def __call__(self, event: dict) -> None:
        kind = event["type"]
        if kind == "phase":
            phase = event["phase"]
            if phase == "research":
                self._task(phase, "research (scan + recipes)")
            elif phase == "calibrate":
                # One row per calibration: its progress events are named `calibration` (one platform)
                # or `calibration@<platform>`, and both land on the row made here.
                platform = event.get("platform", "")
                row = self._task(f"calibration@{platform}", "calibrate (A/A noise)"
                                 + (f" on {platform}" if platform and platform != "local" else ""))
                self.tasks["calibration"] = row
        elif kind == "research_done":
            self.p.update(self._task("research"), completed=1.0,
                          description=f"research: {len(event['hypotheses'])} hypotheses")
        elif kind == "calibrated":
            self.p.update(self._task(f"calibration@{event.get('platform', '')}"), completed=1.0,
                          description="calibrate: done" + (f" on {event['platform']}" if event.get("platform") not in
                                                           (None, "", "local") else ""))
        elif kind == "experiment_start":
            self._task(event["name"], f"experiment {event['name']}")
        elif kind == "progress":
            task = self._task(event["name"], event["name"])
            self.p.update(task, completed=event["fraction"], description=f"{event['name']}: {event['message']}")
        elif kind == "step_done":         # a measured step ended (a failed build sends no 1.0 itself)
            if event["name"] in self.tasks:
                self.p.update(self.tasks[event["name"]], completed=1.0)
        elif kind == "experiment_done":
            task = self._task(event["name"], event["name"])
            tag = " (resumed)" if event.get("resumed") else ""
            self.p.update(task, completed=1.0, description=f"{event['name']}: {event['status']}{tag}")
        elif kind == "warning":
            self.p.console.print(f"[yellow]warning:[/] {event['message']}")
        elif kind == "resume":
            self.p.console.print(f"resuming run at phase {event['phase']}")


def duration(seconds: float) -> str:
    """`45s`, `3m05s`, `1h02m`."""
    s = int(round(max(0.0, seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def branch_line(summary: dict) -> str:
    """What the run left, as the CLI's closing lines say it: a summary names its branch even when
    the branch was deleted (nothing kept), so `branch_left` decides, never the name alone."""
    if summary.get("branch_left", True) and summary.get("branch"):
        return f"branch {summary['branch']}"
    return f"no branch left: {summary.get('branch_note') or 'nothing was kept'}"


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
    def __call__(self, event: dict) -> None:
        with self._lock:
            self._event(event)

    def _event(self, event: dict) -> None:
        kind, now = event["type"], self.clock()
        if kind == "phase":
            extra = f" on {event['platform']}" if event.get("platform") not in (None, "", "local") else ""
            total = f" ({event['total']} to do)" if event.get("total") else ""
            self.line(f"phase {event['phase']}{extra}{total}")
            if event["phase"] == "research":
                self.active["research"] = _Step("scan", 0.0, now)
        elif kind == "progress":
            name, message, fraction = event["name"], event["message"], event["fraction"]
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
        elif kind == "step_done":
            # Every measured step's explicit end (jobs.run.measuring.Measurer.execute), however it ended:
            # no step can go on "running" in the heartbeat because nobody cleared its name.
            st = self.active.pop(event["name"], None)
            if st is not None:            # it ended without a final line of its own (a failed build)
                self.line(f"{event['name']}: ended ({event.get('status', 'unknown')})")
        elif kind == "research_done":
            self.active.pop("research", None)
            self.line(f"research done: {len(event['hypotheses'])} hypotheses"
                      + (f" ({', '.join(event['hypotheses'])})" if event["hypotheses"] else ""))
        elif kind == "calibrated":         # its batches ended with their own step_done events
            self.line("calibration done" + (f" on {event['platform']}" if event.get("platform") not in
                                            (None, "", "local") else ""))
        elif kind == "experiment_start":
            self.active[event["name"]] = _Step("starting", 0.0, now)
            self.line(f"experiment {event['name']}: start")
        elif kind == "experiment_done":
            self.active.pop(event["name"], None)
            tag = " (finished earlier; resumed)" if event.get("resumed") else ""
            self.line(f"experiment {event['name']}: {event['status']}{tag}: {event.get('reason', '')}")
        elif kind == "warning":
            self.line(f"warning: {event['message']}")
        elif kind == "resume":
            self.line(f"resuming run at phase {event['phase']}")
        elif kind == "done":
            self.line("report written: " + branch_line(event.get("summary") or {}))
        elif kind == "cancelled":
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
