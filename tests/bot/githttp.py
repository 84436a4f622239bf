"""Git's smart HTTP protocol on loopback, with GitHub's token authentication, for tests.

The real `git http-backend` (git's own CGI program) serves the bare repositories under `root`;
this server only adds what GitHub adds in front of it: HTTP Basic authentication whose password
must be an installation token (`x-access-token:<token>`), 401 with a `WWW-Authenticate` challenge
otherwise. So a git client that pushes here really has to hand the token over, the way it would to
github.com, and the test sees whether and how it did.

`on_request(method, path, user)` is called before each authenticated request is served (a test can
look at the machine at the moment of the push); `delay` slows every response so the git processes
of a push live long enough to be watched.
"""
from __future__ import annotations

import base64
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterable


class GitHTTP:
    def __init__(self, root: Path, tokens: Callable[[], Iterable[str]], *, delay: float = 0.0,
                 on_request: Callable[[str, str, str], None] | None = None):
        self.root, self.tokens, self.delay, self.on_request = Path(root), tokens, delay, on_request
        self.requests: list[tuple[str, str, int]] = []      # (method, path, status)
        self.authenticated: list[str] = []                  # the tokens that were accepted
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> str:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:      # quiet
                pass

            def do_GET(self) -> None:
                self.serve()

            def do_POST(self) -> None:
                self.serve()

            def challenge(self) -> None:
                outer.requests.append((self.command, self.path, 401))
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="GitHub"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            def body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    data = b""
                    while True:
                        size = int(self.rfile.readline().strip(), 16)
                        if size == 0:
                            self.rfile.readline()
                            return data
                        data += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def serve(self) -> None:
                scheme, _, blob = self.headers.get("Authorization", "").partition(" ")
                user, _, password = (base64.b64decode(blob).decode(errors="replace").partition(":")
                                     if scheme.lower() == "basic" else ("", "", ""))
                if not password or password not in set(outer.tokens()):
                    self.challenge()
                    return
                outer.authenticated.append(password)
                path, _, query = self.path.partition("?")
                if outer.on_request:
                    outer.on_request(self.command, path, user)
                time.sleep(outer.delay)
                env = {"GIT_PROJECT_ROOT": str(outer.root), "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path,
                       "QUERY_STRING": query, "REQUEST_METHOD": self.command, "REMOTE_USER": user,
                       "REMOTE_ADDR": "127.0.0.1", "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                       "PATH": "/usr/bin:/bin"}
                for name in ("Content-Encoding", "Git-Protocol"):
                    if self.headers.get(name):
                        env["HTTP_" + name.upper().replace("-", "_")] = self.headers[name]
                data = self.body()
                env["CONTENT_LENGTH"] = str(len(data))
                proc = subprocess.run(["git", "http-backend"], input=data, env=env, capture_output=True)
                head, _, payload = proc.stdout.partition(b"\r\n\r\n")
                status, headers = 200, []
                for line in head.decode().split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "status":
                        status = int(value.split()[0])
                    elif name:
                        headers.append((name, value.strip()))
                outer.requests.append((self.command, path, status))
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self.url

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
