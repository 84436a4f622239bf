"""The deploy's front door (deploy/nginx) on loopback, and the slow-body attack it holds off.
For the load benchmark (`python -m tools.loadbench --proxy nginx --slow-bodies 16`) and the tests;
not used by the App itself.

`start_nginx` renders deploy/nginx/autoresearch.conf.template exactly as the nginx image does in
compose.yaml (only the two ${...} variables are filled in) inside a minimal nginx.conf of its own
(pid, logs and temp files under a private folder).
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent.parent / "deploy" / "nginx" / "autoresearch.conf.template"

MAIN_CONF = """worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
daemon off;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {tmp}/autoresearch.conf;
}}
"""


def render(listen_port: int, upstream: str) -> str:
    text = TEMPLATE.read_text()
    return text.replace("${NGINX_PORT}", f"127.0.0.1:{listen_port}").replace("${AUTORESEARCH_UPSTREAM}", upstream)


def start_nginx(tmp: Path, listen_port: int, upstream: str) -> subprocess.Popen:
    """nginx in the foreground, serving the deploy's config on 127.0.0.1:`listen_port`."""
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if exe is None:
        raise RuntimeError("nginx is not installed (tests/system-deps.sh installs it)")
    tmp.mkdir(parents=True, exist_ok=True)
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (tmp / sub).mkdir(exist_ok=True)
        os.chmod(tmp / sub, 0o777)          # nginx's workers drop to `nobody` when started as root
    os.chmod(tmp, 0o755)
    (tmp / "autoresearch.conf").write_text(render(listen_port, upstream))
    (tmp / "nginx.conf").write_text(MAIN_CONF.format(tmp=tmp))
    check = subprocess.run([exe, "-t", "-q", "-c", str(tmp / "nginx.conf"), "-p", str(tmp), "-e", str(tmp / "error.log")],
                           capture_output=True, text=True)
    if check.returncode:
        raise RuntimeError(f"nginx -t failed: {check.stderr}")
    return subprocess.Popen([exe, "-c", str(tmp / "nginx.conf"), "-p", str(tmp), "-e", str(tmp / "error.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class SlowBodies:
    """`n` connections that each announce a `length`-byte webhook body and send one byte every
    `interval` seconds (unauthenticated: they never finish, so no signature is ever checked)."""

    def __init__(self, port: int, n: int = 16, length: int = 20 * 1024 * 1024, interval: float = 2.0):
        self.port, self.n, self.length, self.interval = port, n, length, interval
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._one, daemon=True) for _ in range(n)]
        self.open = 0

    def start(self) -> "SlowBodies":
        for t in self._threads:
            t.start()
        time.sleep(0.5)                      # let them all connect and send their headers
        return self

    def _one(self) -> None:
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            s.sendall((f"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       f"X-GitHub-Event: issue_comment\r\nContent-Length: {self.length}\r\n\r\n").encode())
            self.open += 1
            while not self._stop.wait(self.interval):
                s.sendall(b" ")
        except OSError:
            pass                              # closed by the server (a timeout): the attack loses one

    def stop(self) -> None:
        self._stop.set()
