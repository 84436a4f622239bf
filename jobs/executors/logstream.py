"""Following a job on a remote machine from this process: its SDK calls and its log, cancellable.

SDK calls that block (provisioning, tailing a log) run on a daemon thread while this thread wakes
every `heartbeat_s`: to call `progress` (which raises when the run is cancelled, so a cancel gets in
even while nothing happens remotely) and to give up at a deadline. The remote job prints the same
lines as the runner does on this machine (`jobs.measure.runner`): `PROGRESS <fraction> <message>` while it
works and one `RESULT <json>` at the end; any other line is kept as the tail of its log.
"""
from __future__ import annotations

import io
import queue
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from jobs.measure.runner import Progress

# The driver's lines, possibly behind a launcher's "(task, pid=1234) " prefix (SkyPilot adds one).
LINE = re.compile(r"^(?:\([^)]*\)\s+)?(PROGRESS|RESULT|EXPERIMENT_STATUS:)\s?(.*)$")
KEPT_LINES = 200


class RemoteError(Exception):
    """An exception raised by the remote call (as opposed to one raised by `progress`)."""

    def __init__(self, exc: BaseException):
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.exc = exc


class DeadlinePassed(Exception):
    pass


@dataclass
class Watch:
    """How a wait checks in: the clock deadlines are read on, how often, and whom it tells."""
    clock: Callable[[], float]
    heartbeat_s: float
    progress: Progress


class LineSink(io.TextIOBase):
    """A text stream for an SDK that writes a log to a stream: complete lines go to a queue."""

    def __init__(self):
        self.queue: queue.Queue[str] = queue.Queue()
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        data = self._partial + text
        *lines, self._partial = data.split("\n")
        for line in lines:
            self.queue.put(line.rstrip("\r"))
        return len(text)

    def flush_partial(self) -> None:
        if self._partial:
            self.queue.put(self._partial)
            self._partial = ""


def call_in_thread(fn: Callable[[], Any], name: str) -> tuple[threading.Thread, dict[str, Any]]:
    """Starts `fn` on a daemon thread; its return value or exception lands in the returned box."""
    box: dict[str, Any] = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:    # handed to the waiting thread
            box["exc"] = exc
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread, box


def wait_for(fn: Callable[[], Any], deadline: float, watch: Watch, message: str, fraction: float) -> Any:
    """`fn()`'s value; RemoteError if it raised, DeadlinePassed past `deadline` (it is left running)."""
    thread, box = call_in_thread(fn, f"remote-{message}")
    while True:
        thread.join(watch.heartbeat_s)
        if not thread.is_alive():
            break
        if watch.clock() >= deadline:
            raise DeadlinePassed(message)
        watch.progress(message, fraction)       # raises when the run is cancelled
    if "exc" in box:
        raise RemoteError(box["exc"])
    return box.get("value")


@dataclass
class JobLog:
    """What following one job's log saw."""
    result_line: str | None = None      # the RESULT line's JSON, when one came
    lines: list[str] = field(default_factory=list)  # the last KEPT_LINES lines that were not protocol
    timed_out: bool = False             # the deadline passed before a RESULT line
    exit: Any = None                    # what the follow call returned (the job's exit code, for SkyPilot)
    error: BaseException | None = None  # what the follow call raised, if it did

    def ending(self) -> str:
        """Why the log ended, for a job that printed no RESULT line."""
        if self.error is not None:
            return f"log stream failed: {type(self.error).__name__}: {self.error}"
        return f"job exit code {self.exit}"


def follow_job_log(follow: Callable[[LineSink], Any], deadline: float, watch: Watch) -> JobLog:
    """Runs `follow(sink)` (which writes the job's log into `sink` until the job ends), passing its
    PROGRESS lines to `watch.progress`, until it returns or `deadline` passes without a RESULT."""
    sink = LineSink()
    thread, box = call_in_thread(lambda: follow(sink), "remote-logs")
    seen = JobLog()
    message, fraction = "running", 0.0
    while True:
        try:
            line = sink.queue.get(timeout=watch.heartbeat_s)
        except queue.Empty:
            if not thread.is_alive():
                sink.flush_partial()
                if sink.queue.empty():
                    break
                continue
            if watch.clock() >= deadline:
                seen.timed_out = True
                return seen
            watch.progress(message, fraction)    # heartbeat: lets a cancel in
            continue
        match = LINE.match(line)
        if match and match.group(1) == "PROGRESS":
            frac, _, text = match.group(2).partition(" ")
            try:
                fraction, message = float(frac), text or message
            except ValueError:
                pass
            watch.progress(message, fraction)
        elif match and match.group(1) == "RESULT":
            seen.result_line = match.group(2)
        elif not match:
            seen.lines.append(line)
            del seen.lines[:-KEPT_LINES]
        if watch.clock() >= deadline and seen.result_line is None:
            seen.timed_out = True
            return seen
    seen.exit, seen.error = box.get("value"), box.get("exc")
    return seen
