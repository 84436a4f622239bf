"""Loopback HTTP scaffolding shared by the research fakes: a real ThreadingHTTPServer on
127.0.0.1 (a free port) serving a handler class from a daemon thread. Each fake keeps its own
handler (routes, scripts, recorded requests); this is only the server around it."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that keeps pytest output clean (no access log)."""

    def log_message(self, *args):
        pass


class LoopbackServer:
    """`handler` served on 127.0.0.1 at `base_url`; a context manager (start on enter, stop on exit)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self):
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
