"""jobs/contract/events.py: one frozen type per progress event, all of them in the union `Event`
that the consumers (jobs/run/progress_view.py, bot/progress.py) dispatch on."""
from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest

from jobs.contract import events as ev


def test_every_event_type_is_in_the_union_and_frozen():
    defined = {c for _, c in inspect.getmembers(ev, inspect.isclass)
               if c.__module__ == ev.__name__ and dataclasses.is_dataclass(c)}
    assert set(typing.get_args(ev.Event)) == defined and len(defined) == 11
    assert all(c.__dataclass_params__.frozen for c in defined)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ev.RunWarning("x").message = "y"  # type: ignore[misc]
