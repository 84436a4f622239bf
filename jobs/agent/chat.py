"""What a model agent needs from an LLM provider: one method, `ChatModel.complete`. Pure.

The conversation is plain data in this module's types, whatever the provider's wire format; an
adapter (`jobs/agent/claude.py` for Anthropic's Messages API) translates a `ChatRequest` into its
SDK's call and the answer back into a `ChatReply`. Retries, timeouts and transport errors are the
adapter's (its SDK's) business; metering, redaction, tools and prompts are the agent's
(`jobs/agent/llm.py`), so a second provider is one adapter module and one registry entry.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]          # JSON schema of the tool's input


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    input: Any                            # as the model sent it: validated by the tool, never trusted


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    text: str
    is_error: bool = False


@dataclass(frozen=True)
class ChatMessage:
    """One turn: the user's text, the model's text and tool calls, or the results of those calls."""

    role: Literal["user", "assistant"]
    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    results: tuple[ToolResult, ...] = ()


@dataclass(frozen=True)
class ChatRequest:
    model: str
    max_tokens: int
    system: str
    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...]
    force_tool: str | None = None         # the model must answer by calling this tool


@dataclass(frozen=True)
class Usage:
    """Tokens of one response, as the provider counted them (what the meter prices)."""

    input: int = 0
    output: int = 0
    cache_write: int = 0
    cache_read: int = 0


@dataclass(frozen=True)
class ChatReply:
    text: str
    calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    model: str = ""                       # the model that answered (a dated id), if the provider says

    def as_message(self) -> ChatMessage:
        return ChatMessage("assistant", self.text, self.calls)


class ChatModel(Protocol):
    def complete(self, request: ChatRequest) -> ChatReply: ...
