"""A model agent's settings and its meter: tokens and dollars per run, and the caps that stop it.

Provider-neutral: the meter prices each response's `chat.Usage` with a table of USD per million
tokens; each provider's adapter brings its own built-in table, which the repository config's
`llm.pricing` overrides and extends. A model with no price is refused before any request, since
its spending could not be capped.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobs.contract.config import LLM, TargetConfig
from .chat import Usage
from .offline import NotImplementable

_CAPS = LLM()              # the model and caps have one home: the repo config schema (jobs/contract/config.py)


class BudgetExceeded(NotImplementable):
    """A token or dollar cap of this run was reached; no further API calls are made."""


@dataclass
class ChatSettings:
    model: str = _CAPS.model
    max_tokens: int = _CAPS.max_tokens              # per response
    max_run_tokens: int = _CAPS.max_run_tokens      # input + output, whole run
    max_usd: float = _CAPS.max_usd                  # whole run
    max_turns: int = _CAPS.max_turns                # tool-use turns per hypothesis
    max_retries: int = _CAPS.max_retries            # the SDK's own retry policy
    timeout: float = _CAPS.timeout                  # seconds per request, the SDK's own
    pricing: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: TargetConfig, pricing: dict[str, dict[str, float]] | None = None,
                    **overrides: Any) -> ChatSettings:
        """Defaults <- `config.llm` (when the schema has it) <- keyword overrides; `pricing` is the
        provider's built-in table, extended and overridden by the config's."""
        values: dict[str, Any] = {}
        llm = getattr(config, "llm", None)
        if llm is not None:
            data = llm.model_dump() if hasattr(llm, "model_dump") else dict(llm)
            values.update({k: v for k, v in data.items() if k in cls.__dataclass_fields__ and v is not None})
        values.update({k: v for k, v in overrides.items() if k in cls.__dataclass_fields__ and v is not None})
        # unset cache rates fall back to the input rate (Meter.add), not to None
        given = {m: {k: v for k, v in p.items() if v is not None} for m, p in values.pop("pricing", {}).items()}
        return cls(**values, pricing={**(pricing or {}), **given})


@dataclass
class Meter:
    """Tokens and dollars of this run, from each response's usage."""

    settings: ChatSettings
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    calls: int = 0
    stopped: str = ""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def price(self, model: str) -> dict[str, float]:
        if model in self.settings.pricing:
            return self.settings.pricing[model]
        for name, price in self.settings.pricing.items():   # dated ids: claude-sonnet-4-5-2025...
            if model.startswith(name):
                return price
        raise BudgetExceeded(f"no price for model {model!r} in the pricing table; add it to the config "
                             "so spending can be capped")

    def check(self) -> None:
        if self.stopped:
            raise BudgetExceeded(self.stopped)
        s = self.settings
        if self.tokens >= s.max_run_tokens:
            self.stopped = f"LLM budget: {self.tokens} tokens used, cap {s.max_run_tokens}"
        elif self.usd >= s.max_usd:
            self.stopped = f"LLM budget: {self.usd:.4f} USD spent, cap {s.max_usd:g} USD"
        if self.stopped:
            raise BudgetExceeded(self.stopped)

    def add(self, usage: Usage, model: str) -> None:
        price = self.price(model)
        self.calls += 1
        self.input_tokens += usage.input + usage.cache_write + usage.cache_read
        self.output_tokens += usage.output
        self.usd += (usage.input * price["input"] + usage.output * price["output"]
                     + usage.cache_write * price.get("cache_write", price["input"])
                     + usage.cache_read * price.get("cache_read", price["input"])) / 1e6

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost_usd": round(self.usd, 6), "stopped": self.stopped}
