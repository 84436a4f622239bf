"""The run dashboard in a real headless Chromium (Debian's chromium + chromedriver) against the
App's Flask app served on loopback, plus its access rules through Flask's test client."""
from __future__ import annotations

import shutil
import sys
import threading
import time
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from jobs.contract import ledger
from jobs.contract.model import ExperimentRecord

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the bot tests' helpers
from recordfixtures import record  # noqa: E402

RUN = "7-abc1234"
REPO = "octo/synth"
SECRET = "dashboard-test-secret"
LEAK = "ghs_leakedtoken_never_rendered"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def metric(delta: float, p: float = 0.01) -> dict:
    return {"name": "score", "base_mean": 100.0, "base_sd": 1.0, "head_mean": 100.0 * (1 + delta / 100),
            "head_sd": 1.0, "n_base": 8, "n_head": 8, "delta_pct": delta, "p_value": p,
            "ci_low_pct": delta - 1.5, "ci_high_pct": delta + 1.5, "mde_pct": 1.2, "method": "welch-log",
            "verdict": "win" if delta > 2 else "no detectable difference"}


def experiment(name: str, platform: str, status: str, delta: float | None, reason: str = "") -> ExperimentRecord:
    return ExperimentRecord(run_id=RUN, name=name, hypothesis=name, platform=platform, status=status,
                            reason=reason or status, commit="c" * 40, base_commit="b" * 40,
                            metrics=[metric(delta)] if delta is not None else [], seconds=12.0,
                            log=f"build output with {LEAK}")


def write_run(root: Path, phase: str = "experiments") -> Path:
    out = root / "octo" / "synth" / RUN / "out"
    out.mkdir(parents=True)
    state = {"run_id": RUN, "base_commit": "b" * 40, "branch": f"autoresearch/{RUN}", "phase": phase,
             "platforms": ["x86", "arm"], "agent": "offline", "cost_usd": 1.25,
             "calibration": {p: {"score": {"floor_pct": 1.1, "repeats": 8}} for p in ("x86", "arm")},
             "hypotheses": [{"id": h, "title": t, "kind": "fusion"} for h, t in
                            (("fuse-rmsnorm", "fuse RMSNorm into the matmul"), ("fuse-softmax", "one-pass softmax"),
                             ("prefetch", "software prefetch"))]}
    ledger.save_state(out, state)
    ledger.append(out, experiment("fuse-rmsnorm", "x86", "keep", 6.2))
    ledger.append(out, experiment("fuse-rmsnorm", "arm", "keep", 3.1))
    ledger.append(out, experiment("fuse-softmax", "x86", "discard", 0.3, "no detectable difference (MDE 1.2 %)"))
    return out


@pytest.fixture()
def served(tmp_path, redis_url, monkeypatch):
    """The App's own Flask app (with the dashboard) over HTTP on loopback, and a run directory."""
    from bot.app import create_app
    from bot.settings import Settings
    from bot.store import Store, connect
    monkeypatch.setenv("AUTORESEARCH_DASHBOARD_USERS", "alice,bob")
    monkeypatch.delenv("AUTORESEARCH_DASHBOARD_SECRET", raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", LEAK)
    key = tmp_path / "app.pem"
    key.write_text("not used by the dashboard")
    settings = Settings(app_id="1", private_key_path=key, webhook_secret=SECRET, redis_url=redis_url,
                        workdir=tmp_path / "work")
    out = write_run(settings.workdir)
    store = Store(connect(redis_url))
    store.r.flushdb()
    store.replace_run(record(run_id=RUN, repo=REPO, state="running", requester="alice", message="wave 2 running"))
    app = create_app(settings)
    if "dashboard" not in app.blueprints:           # until bot/app.py registers it
        from bot.dashboard import blueprint
        app.register_blueprint(blueprint(settings))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", app, out, settings
    server.shutdown()


def link(base: str, user: str = "alice", run: str | None = RUN, seconds: float = 600, now=None,
         repo: str | None = REPO) -> str:
    from bot.dashboard import make_token, signing_key
    token = make_token(signing_key({}, SECRET), user, run, seconds, now=now, repo=repo if run else None)
    return f"{base}/runs{'/' + run if run else ''}?token={token}"


@pytest.fixture()
def browser(tmp_path):
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("chromium and chromium-driver are not installed: run tests/system-deps.sh")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1200,1000", f"--user-data-dir={tmp_path / 'chrome-profile'}"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


def _wait(fn, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def text_of(browser, element_id: str) -> str:
    """The rendered text of an element, read in one step inside the page: the page re-renders on
    every poll, so a found element can go stale before Selenium reads its text."""
    return browser.execute_script("const e = document.getElementById(arguments[0]); "
                                  "return e ? e.innerText : null;", element_id)


def test_run_page_in_chromium_shows_experiments_and_refreshes_live(served, browser, tmp_path):
    from selenium.webdriver.common.by import By
    base, _, out, _ = served

    browser.get(f"{base}/runs/{RUN}")
    assert "Sign in with a dashboard link" in browser.page_source and "fuse-rmsnorm" not in browser.page_source

    browser.get(link(base))
    assert browser.current_url == f"{base}/runs/{RUN}"            # the token left the address bar
    table = text_of(browser, "experiments")
    for text in ("fuse-rmsnorm", "fuse-softmax", "prefetch", "calibration (A/A)", "x86", "arm",
                 "keep", "+6.2 %", "+3.1 %", "discard", "pending"):
        assert text in table, text
    assert text_of(browser, "state") == "running"        # the App's record, from Redis
    assert text_of(browser, "cost") == "1.25 USD"
    assert text_of(browser, "progress") == "1/3"
    assert "wave 2: fuse-softmax — running" in browser.page_source.replace("&nbsp;", " ")
    bars = browser.find_elements(By.CSS_SELECTOR, "#chart rect.bar")
    assert len(bars) == 3 and len(browser.find_elements(By.CSS_SELECTOR, "#chart rect.s-keep")) == 2
    assert LEAK not in browser.page_source and SECRET not in browser.page_source

    # The run goes on: the worker appends to the ledger and saves state; the open page follows
    # without a reload (a marker set on the window survives).
    browser.execute_script("window.__marker = 42;")
    ledger.append(out, experiment("fuse-softmax", "arm", "discard", -0.4))
    ledger.append(out, experiment("prefetch", "x86", "crash", None, "benchmark exited with status 3"))
    state = ledger.load_state(out)
    ledger.save_state(out, {**state, "cost_usd": 2.5})
    _wait(lambda: "crash" in text_of(browser, "experiments"), what="the new experiment")
    assert browser.execute_script("return window.__marker") == 42
    assert browser.execute_script("return window.__autoresearchPolls") >= 1
    assert text_of(browser, "cost") == "2.50 USD"
    assert text_of(browser, "progress") == "2/3"
    assert "benchmark exited with status 3" in text_of(browser, "experiments")

    shots = tmp_path / "artifacts"
    shots.mkdir()
    shot = shots / "dashboard-run.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    ARTIFACTS.mkdir(exist_ok=True)
    if not (ARTIFACTS / shot.name).exists():         # committed once, as the issue asks
        shutil.copy2(shot, ARTIFACTS / shot.name)

    # Done: the stack is measured, the phase is final, and the page stops polling.
    ledger.append(out, experiment("prefetch", "arm", "skipped", None, "budget: max_experiments reached"))
    stack = experiment("stack", "x86", "keep", 6.0)
    stack.kind = "stack"
    ledger.append(out, stack)
    ledger.save_state(out, {**ledger.load_state(out), "phase": "done"})
    _wait(lambda: text_of(browser, "live") == "finished", what="the page to stop polling")
    assert "stack" in text_of(browser, "experiments")
    polls = browser.execute_script("return window.__autoresearchPolls")
    time.sleep(2.0)
    assert browser.execute_script("return window.__autoresearchPolls") == polls

    # A link scoped to one run shows only that run.
    browser.get(f"{base}/runs")
    assert RUN in text_of(browser, "runs")


def test_access_rules(served):
    base, app, out, settings = served
    client = app.test_client()
    path = f"/runs/{RUN}"

    def status(url: str) -> int:
        return client.get(url.removeprefix(base)).status_code

    assert client.get(path).status_code == 401
    assert client.get(f"{path}.json").status_code == 401
    assert client.get("/runs").status_code == 401
    assert status(link(base, now=time.time() - 3600, seconds=60)) == 403            # expired
    assert status(link(base, user="mallory")) == 403                                  # not on the allow-list
    good = link(base)
    assert status(good[:-3] + ("AAA" if not good.endswith("AAA") else "BBB")) == 403  # tampered
    from bot.dashboard import make_token
    assert status(f"{base}{path}?token={make_token('another key', 'alice', RUN, repo=REPO)}") == 403

    resp = client.get(good.removeprefix(base))
    assert resp.status_code == 303 and resp.headers["Location"] == path
    cookie = resp.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/runs" in cookie
    page = client.get(path)
    assert page.status_code == 200 and "fuse-rmsnorm" in page.text
    csp = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src 'nonce-" in csp and "https:" not in csp
    assert page.headers["Referrer-Policy"] == "no-referrer" and page.headers["Cache-Control"] == "no-store"
    assert "http://" not in page.text and "https://" not in page.text and "<script src" not in page.text  # no CDN
    data = client.get(f"{path}.json").get_json()
    assert data["run"]["run_id"] == RUN and data["final"] is False and "<table" in data["html"]
    for text in (page.text, str(data)):
        assert LEAK not in text and SECRET not in text and "build output" not in text
    assert client.post(path).status_code == 405                                       # read-only

    # Scoped to RUN: another run of the same workdir stays hidden.
    other = out.parent.parent / "9-def5678" / "out"
    other.mkdir(parents=True)
    ledger.save_state(other, {"run_id": "9-def5678", "phase": "research", "platforms": ["local"]})
    assert client.get("/runs/9-def5678").status_code == 404
    assert "9-def5678" not in client.get("/runs").text
    # A link for every run (an allow-listed user) sees both.
    client.get(link(base, user="bob", run=None).removeprefix(base))
    listing = client.get("/runs").text
    assert "9-def5678" in listing and RUN in listing
    assert client.get("/runs/9-def5678").status_code == 200


def test_link_command_prints_a_working_link(served, monkeypatch, capsys):
    base, app, _, _ = served
    from bot.dashboard import main
    monkeypatch.setenv("AUTORESEARCH_WEBHOOK_SECRET", SECRET)
    assert main(["link", "--user", "alice", "--repo", REPO, "--run", RUN, "--hours", "1", "--base-url", base]) == 0
    url = capsys.readouterr().out.strip()
    assert url.startswith(f"{base}/runs/{RUN}?token=")
    assert app.test_client().get(url.removeprefix(base)).status_code == 303
    assert main(["link", "--user", "mallory"]) == 2
    assert main(["link", "--user", "alice", "--run", RUN]) == 2          # a run without its repository


def test_a_grant_names_the_repository_and_the_run(served):
    """N12: run ids repeat across repositories; a grant for run R of octo/synth does not show run R
    of another repository, by path, by ?repo=, or in the list; old tokens without a repository fail."""
    base, app, out, settings = served
    client = app.test_client()
    twin = settings.workdir / "evil" / "other" / RUN / "out"
    twin.mkdir(parents=True)
    ledger.save_state(twin, {"run_id": RUN, "phase": "research", "platforms": ["local"],
                             "hypotheses": [{"id": "twin-secret", "title": "only in evil/other"}]})
    import os
    os.utime(twin / ledger.STATE, None)                       # the newest run called RUN
    assert client.get(link(base).removeprefix(base)).status_code == 303
    assert "fuse-rmsnorm" in client.get(f"/runs/{RUN}").text
    assert client.get(f"/runs/{RUN}?repo=evil/other").status_code == 404
    assert client.get(f"/runs/{RUN}.json?repo=evil/other").status_code == 404
    assert "twin-secret" not in client.get("/runs").text
    # a grant for that other repository sees it, and not ours
    other = app.test_client()
    assert other.get(link(base, repo="evil/other").removeprefix(base)).status_code == 303
    assert "twin-secret" in other.get(f"/runs/{RUN}").text
    assert other.get(f"/runs/{RUN}?repo={REPO}").status_code == 404
    # a token of the old form (a run id, no repository) is refused
    from itsdangerous import URLSafeSerializer
    from bot.dashboard.auth import LINK_SALT
    from bot.dashboard import signing_key
    old = URLSafeSerializer(signing_key({}, SECRET), salt=LINK_SALT).dumps(
        {"u": "alice", "r": RUN, "exp": int(time.time()) + 600})
    assert app.test_client().get(f"/runs/{RUN}?token={old}").status_code == 403
