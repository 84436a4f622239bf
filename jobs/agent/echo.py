"""Throwaway example agent (scratch commit, reverted): proves a new agent is its module plus one registry line."""
from __future__ import annotations

from typing import Any

from .offline import NotImplementable


class EchoAgent:
    name = "echo"

    def implement(self, h, tree, config) -> str:
        raise NotImplementable(f"echo: {h.title}")

    def revise(self, pending, results):
        return pending


def make(recipes: dict, config, **_: Any) -> EchoAgent:
    return EchoAgent()
