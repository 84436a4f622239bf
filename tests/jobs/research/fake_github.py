"""A minimal fake GitHub REST API on loopback, just the repository endpoints research reads.

Routes are data: {path: json} for exact paths (query ignored), plus a compare table keyed by
`basehead`. Every request (path, query, headers) is recorded.
"""
from __future__ import annotations

import json
from urllib.parse import parse_qs, unquote, urlsplit

from loopback import LoopbackServer, QuietHandler


class FakeGitHub(LoopbackServer):
    def __init__(self, routes: dict[str, object]):
        self.routes = routes
        self.requests: list[tuple[str, dict, dict]] = []
        fake = self

        class Handler(QuietHandler):
            def do_GET(self):
                parts = urlsplit(self.path)
                path = unquote(parts.path)
                fake.requests.append((path, parse_qs(parts.query), {k.lower(): v for k, v in self.headers.items()}))
                body = fake.routes.get(path)
                if callable(body):
                    body = body(parse_qs(parts.query))
                status = 200 if body is not None else 404
                data = json.dumps(body if body is not None else {"message": "Not Found"}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        super().__init__(Handler)
