"""A fake Anthropic Messages API on loopback: a real HTTP server in a thread replaying a script.

The SDK talks to it over HTTP through `base_url`, so retries, timeouts, headers and JSON
(de)serialisation are the SDK's real ones. Each POST /v1/messages consumes the next script step:
a Message body (dict), a `(status, body)` pair for errors such as 529, or a callable
`step(request_json) -> dict | (status, body)` for turns that depend on what was sent. Every raw
request body is kept so tests can assert what the model was (and was not) shown.
"""
from __future__ import annotations

import itertools
import json
import threading
from typing import Any, Callable

from loopback import LoopbackServer, QuietHandler

_ids = itertools.count(1)


def message(content: list[dict[str, Any]], stop_reason: str = "end_turn", usage: dict[str, int] | None = None,
            model: str = "claude-sonnet-4-6") -> dict[str, Any]:
    return {"id": f"msg_{next(_ids)}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": usage or {"input_tokens": 1000, "output_tokens": 100}}


def tool_use(name: str, input: Any, **kw) -> dict[str, Any]:
    return message([{"type": "tool_use", "id": f"toolu_{next(_ids)}", "name": name, "input": input}],
                   "tool_use", **kw)


def text(words: str, **kw) -> dict[str, Any]:
    return message([{"type": "text", "text": words}], "end_turn", **kw)


OVERLOADED = (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the last user turn of a request."""
    last = request["messages"][-1]
    content = last["content"] if isinstance(last["content"], list) else []
    return [b for b in content if b.get("type") == "tool_result"]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content)
    return content or ""


class FakeMessagesAPI(LoopbackServer):
    def __init__(self, script: list[Any]):
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(QuietHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
                with fake._lock:
                    fake.raw.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    try:
                        request = json.loads(body)
                    except ValueError:
                        request = {}
                    fake.requests.append(request)
                    if self.path.split("?")[0] != "/v1/messages":
                        status, payload = 404, {"type": "error", "error": {"type": "not_found_error",
                                                                            "message": self.path}}
                    elif not fake.script:
                        fake.errors.append("script exhausted")
                        status, payload = 500, {"type": "error", "error": {"type": "api_error",
                                                                            "message": "script exhausted"}}
                    else:
                        step = fake.script.pop(0)
                        try:
                            step = step(request) if callable(step) else step
                        except AssertionError as exc:
                            fake.errors.append(f"assertion in scripted turn: {exc}")
                            step = (400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                      "message": str(exc)}})
                        status, payload = step if isinstance(step, tuple) else (200, step)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", f"req_{len(fake.requests)}")
                if status >= 400:
                    self.send_header("retry-after-ms", "20")       # keep the SDK's backoff short
                    if payload["error"]["message"] == "script exhausted":
                        self.send_header("x-should-retry", "false")
                self.end_headers()
                self.wfile.write(data)

        super().__init__(Handler)

    def client(self, **kw):
        import anthropic
        return anthropic.Anthropic(api_key="sk-ant-test-key-0123456789", base_url=self.base_url,
                                   **{"max_retries": 2, "timeout": 20, **kw})


Step = dict[str, Any] | tuple[int, dict[str, Any]] | Callable[[dict[str, Any]], Any]
