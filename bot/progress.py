"""Pipeline events -> run record fields -> the sticky status comment (edits throttled).

`Progress` is the pipeline's `on_event` callback in the bot (the CLI's is a rich progress view).
It must never end a long run: a GitHub or Redis blip while reporting is logged and skipped, and
the next event tries again. `best_effort_status` is that rule, for every status report of the flow.
"""
from __future__ import annotations

import logging
import math
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from jobs import api
from jobs.api import Event, events

from .ports import RunStore
from .record import RunRecord
from .status import best_line

log = logging.getLogger("autoresearch.bot")


@contextmanager
def best_effort_status() -> Iterator[None]:
    """Around a status report (the record's progress fields, the status comment): a GitHub or Redis
    blip is logged and skipped, never raised. The record's state is written before, and holds the
    truth; the comment catches up at the next report."""
    try:
        yield
    except Exception as exc:
        log.warning("status update failed: %s", exc)


MAX_WARNINGS = 5        # the status comment shows the newest; the report lists them all


class Progress:
    def __init__(self, store: RunStore, refresh: Callable[[str], None], rec: RunRecord, out: Path, primary: str,
                 interval: float = 2.0):
        self.store, self.refresh, self.rec, self.out, self.primary = store, refresh, rec, Path(out), primary
        self.interval = interval
        self.done = 0
        self.platforms = max(1, len(rec.platforms))
        self.last = -math.inf      # the first event always shows (monotonic time starts near 0 at boot)
        self.warnings = list(rec.warnings)          # a resumed run keeps what it said before

    def fields(self, event: Event) -> tuple[dict[str, Any], bool]:
        """The record fields an event changes, and whether the status comment must show it now."""
        fields: dict[str, Any] = {}
        force = False
        match event:
            case events.Phase(phase=phase, platform=platform, total=total):
                fields["phase"] = phase + (f" ({platform})" if platform else "")
                if phase == "experiments" and total is not None:
                    fields["experiments_total"] = total * self.platforms
                force = True
            case events.ExperimentDone(name=name) if not name.startswith("stack"):
                self.done += 1
                fields["experiments_done"] = self.done
                fields["best"] = best_line(api.read_records(self.out), self.primary)
                force = True
            case events.ExperimentStart(name=name) if name.startswith("stack"):
                fields["phase"] = "stack (re-measuring the kept changes together)"
                force = True
            case events.StepProgress(name=name, message=message):
                fields["phase_detail"] = f"{name}: {message}"
            case events.RunWarning(message=message):
                # What changes what the run tests or how far to trust it (a profile that timed out, a
                # calibration redone): the maintainer watching the issue must see it now, not in the PR.
                self.warnings = (self.warnings + [message])[-MAX_WARNINGS:]
                fields["warnings"] = self.warnings
                force = True
            case events.Done():
                fields["phase"] = "report"
                force = True
        fields["cost_usd"] = api.spent_usd(self.out)
        return fields, force

    def __call__(self, event: Event) -> None:
        with best_effort_status():          # a GitHub or Redis blip must not kill a long run
            fields, force = self.fields(event)
            self.store.update_run(self.rec.repo, self.rec.run_id, **fields)
            if force or time.monotonic() - self.last > self.interval:
                self.last = time.monotonic()
                self.refresh(self.rec.run_id)
