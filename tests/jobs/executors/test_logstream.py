"""Following a remote job (jobs.executors.logstream) with real threads: PROGRESS goes to progress,
RESULT is taken, other lines are kept; a deadline ends the wait, a cancel gets in while nothing
happens remotely, and a failing remote call is reported as the remote's."""
from __future__ import annotations

import threading

import pytest

from jobs.executors.logstream import KEPT_LINES, DeadlinePassed, RemoteError, Watch, follow_job_log, wait_for


class Cancelled(Exception):
    pass


class Clock:
    """A clock the test moves: deadlines are read on it, not on the wall."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def watch(clock=None, told=None, cancel_after=None) -> Watch:
    told = [] if told is None else told

    def progress(message, fraction):
        told.append((message, fraction))
        if cancel_after is not None and len(told) > cancel_after:
            raise Cancelled(message)
    return Watch(clock or Clock(), 0.01, progress)


def test_protocol_lines_are_read_and_the_rest_is_kept():
    def job(sink):
        sink.write("(task, pid=7) PROGRESS 0.5 building base\nsetting up\n")
        sink.write("PROGRESS 0.9 bench")          # a line may arrive in pieces
        sink.write("marking\nRESULT {\"status\": \"ok\"}\nlast words without a newline")
        return 0
    told: list = []
    seen = follow_job_log(job, deadline=100.0, watch=watch(told=told))
    assert ("building base", 0.5) in told and ("benchmarking", 0.9) in told
    assert seen.result_line == '{"status": "ok"}'
    assert seen.lines == ["setting up", "last words without a newline"]
    assert (seen.timed_out, seen.exit, seen.error) == (False, 0, None)


def test_only_the_tail_of_a_long_log_is_kept():
    def job(sink):
        sink.write("".join(f"line {i}\n" for i in range(KEPT_LINES + 50)))
        return 1
    seen = follow_job_log(job, deadline=100.0, watch=watch())
    assert len(seen.lines) == KEPT_LINES and seen.lines[-1] == f"line {KEPT_LINES + 49}"
    assert seen.result_line is None and seen.ending() == "job exit code 1"


def test_a_failing_log_stream_is_the_remotes_error():
    def job(sink):
        sink.write("half a log\n")
        raise ConnectionResetError("API server went away")
    seen = follow_job_log(job, deadline=100.0, watch=watch())
    assert seen.lines == ["half a log"] and isinstance(seen.error, ConnectionResetError)
    assert seen.ending() == "log stream failed: ConnectionResetError: API server went away"


def test_a_silent_job_past_its_deadline_times_out_and_a_cancel_gets_in():
    release = threading.Event()
    clock = Clock()

    def hanging_job(sink):
        sink.write("PROGRESS 0.1 started\n")
        release.wait(30)
    try:
        told: list = []

        def move_clock_once_started(message, fraction):
            told.append((message, fraction))
            clock.now = 101.0                         # time passes while the job says nothing
        seen = follow_job_log(hanging_job, deadline=100.0, watch=Watch(clock, 0.01, move_clock_once_started))
        assert seen.timed_out and seen.result_line is None and told[0] == ("started", 0.1)

        with pytest.raises(Cancelled):
            follow_job_log(hanging_job, deadline=1e9, watch=watch(Clock(), cancel_after=3))
    finally:
        release.set()


def test_waiting_on_a_remote_call():
    assert wait_for(lambda: ("job-1", "handle"), 100.0, watch(), "provisioning", 0.0) == ("job-1", "handle")

    def refused():
        raise PermissionError("quota exceeded")
    with pytest.raises(RemoteError, match="PermissionError: quota exceeded") as err:
        wait_for(refused, 100.0, watch(), "provisioning", 0.0)
    assert isinstance(err.value.exc, PermissionError)

    release = threading.Event()
    try:
        clock = Clock()
        clock.now = 100.0
        with pytest.raises(DeadlinePassed):
            wait_for(lambda: release.wait(30), 100.0, watch(clock), "provisioning", 0.0)
        told: list = []
        with pytest.raises(Cancelled):
            wait_for(lambda: release.wait(30), 1e9, watch(told=told, cancel_after=2), "provisioning", 0.0)
        assert told[0] == ("provisioning", 0.0)
    finally:
        release.set()
