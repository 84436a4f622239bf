"""The deploy's nginx front door (deploy/nginx, compose.yaml `proxy`) on loopback, in front of
`autoresearch serve`: the slow-body attack of issue 12 does not starve real deliveries, and bodies
over GitHub's 25 MB cap are refused by nginx before the app sees them. Figures: tools/loadbench.py."""
from __future__ import annotations

import http.client
import io
import shutil
import socket
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, free_port
from tools import loadbench
from tools.frontdoor import TEMPLATE, start_nginx

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists(),
                                reason="nginx is installed by tests/system-deps.sh")


def metrics(argv: list[str]) -> dict[str, float]:
    out = io.StringIO()
    with redirect_stdout(out):
        assert loadbench.main(argv) == 0
    return {k: float(v) for k, v in (line.removeprefix("METRIC ").split("=") for line in out.getvalue().splitlines()
                                     if line.startswith("METRIC "))}


@pytest.mark.timeout(120)
def test_slow_bodies_do_not_starve_deliveries_behind_nginx():
    m = metrics(["--n", "10", "--rate", "5", "--slow-bodies", "16", "--proxy", "nginx"])
    assert m["answered"] == 10 and m["lost_deliveries"] == 0 and m["commands_lost"] == 0, m


def test_bodies_over_25_mb_are_refused_by_nginx(tmp_path):
    upstream = socket.socket()               # nothing should ever reach it
    upstream.bind(("127.0.0.1", 0))
    upstream.listen(1)
    port = free_port()
    proc = start_nginx(tmp_path / "nginx", port, f"127.0.0.1:{upstream.getsockname()[1]}")
    try:
        loadbench.wait_port(port)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.putrequest("POST", "/webhook")
        conn.putheader("Content-Length", str(26 * 1024 * 1024))
        conn.endheaders()
        assert conn.getresponse().status == 413
        upstream.settimeout(0.2)
        with pytest.raises(TimeoutError):
            upstream.accept()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        upstream.close()


def test_compose_puts_the_front_door_before_the_web_service():
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    proxy = services["proxy"]
    assert any(v.startswith("./deploy/nginx/autoresearch.conf.template:/etc/nginx/templates/") for v in proxy["volumes"])
    assert proxy["environment"]["AUTORESEARCH_UPSTREAM"] == "web:8000"
    assert "ports" not in services["web"]                  # only the proxy is published
    text = TEMPLATE.read_text()
    for directive in ("client_max_body_size 25m;", "client_body_timeout 5s;", "client_header_timeout 5s;",
                      "proxy_request_buffering on;"):
        assert directive in text
