"""The Claude agent: the model agent (`jobs/agent/llm.py`) over Anthropic's Messages API.

The only module that speaks to Anthropic (tests/test_layering.py holds the SDK to it):
`AnthropicChat.complete` turns a provider-neutral `chat.ChatRequest` into `messages.create` and the
response back into a `chat.ChatReply`. Retries and timeouts are the SDK's own (`max_retries`,
`timeout` on the client, from the config's `llm`). `make` is the registry's factory
(jobs/contract/agentkinds.py): it needs ANTHROPIC_API_KEY and the `llm` extra unless a client is given.
"""
from __future__ import annotations

import os
from typing import Any

from jobs.contract.config import TargetConfig
from jobs.contract.errors import RunError
from .chat import ChatMessage, ChatReply, ChatRequest, ToolCall, ToolResult, Usage
from .llm import LLMAgent
from .meter import ChatSettings

# USD per million tokens (input, output, 5-minute cache write, cache read), Anthropic's published
# rates when written. The repo config's pricing table overrides and extends this; a model with no
# price is refused, since its spending could not be capped.
DEFAULT_PRICING: dict[str, dict[str, float]] = {
    "claude-sonnet-4-6": {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.30},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_write": 1.25, "cache_read": 0.10},
}


def _result(r: ToolResult) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": r.call_id, "content": r.text}
    if r.is_error:
        block["is_error"] = True
    return block


def _content(message: ChatMessage) -> str | list[dict[str, Any]]:
    if message.results:
        return [_result(r) for r in message.results]
    if message.role == "user":
        return message.text
    # The API refuses an empty text block; a turn of tool calls alone is the usual assistant turn.
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.text}] if message.text.strip() else []
    return blocks + [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.input} for c in message.calls]


class AnthropicChat:
    """`chat.ChatModel` over an `anthropic.Anthropic` client (or anything with its `messages.create`)."""

    def __init__(self, client: Any):
        self.client = client

    def complete(self, request: ChatRequest) -> ChatReply:
        kw: dict[str, Any] = {
            "model": request.model, "max_tokens": request.max_tokens, "system": request.system,
            "messages": [{"role": m.role, "content": _content(m)} for m in request.messages],
            "tools": [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                      for t in request.tools]}
        if request.force_tool:
            kw["tool_choice"] = {"type": "tool", "name": request.force_tool}
        response = self.client.messages.create(**kw)
        count = (lambda k: getattr(response.usage, k, 0) or 0)
        usage = Usage(count("input_tokens"), count("output_tokens"), count("cache_creation_input_tokens"),
                      count("cache_read_input_tokens"))
        return ChatReply(text=" ".join(b.text for b in response.content if b.type == "text"),
                         calls=tuple(ToolCall(b.id, b.name, b.input) for b in response.content if b.type == "tool_use"),
                         usage=usage, model=getattr(response, "model", None) or "")


def make(recipes: dict, config: TargetConfig, *, client: Any = None, api_key: str | None = None,
         base_url: str | None = None, secrets: list[str] | None = None,
         context: list[tuple[str, str]] | None = None, **settings: Any) -> LLMAgent:
    """The Claude agent. Needs ANTHROPIC_API_KEY (or `api_key`) unless a `client` is given."""
    s = ChatSettings.from_config(config, DEFAULT_PRICING, **settings)
    if client is None:
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise RunError("--agent claude needs ANTHROPIC_API_KEY in the environment; without it use "
                           "--agent offline (the default)")
        try:
            import anthropic
        except ImportError:
            raise RunError("--agent claude needs the anthropic SDK: pip install 'autoresearch[llm]'") from None
        client = anthropic.Anthropic(api_key=key, base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL"),
                                     max_retries=s.max_retries, timeout=s.timeout)
        secrets = list(secrets or []) + [key]
    return LLMAgent("claude", recipes, config, AnthropicChat(client), s, secrets=secrets, context=context)
