"""Issue 41: one repository can never reach another's. Each attack of the issue's table (A1, A1b,
A4, A5) replayed at the isolation level with real bubblewrap and a real build step; each test
asserts the attack's evidence is absent outside the sandbox (a canary, an owner, a key) and fails
on ea10b95, where the attacks worked."""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from jobs.guard import cachedirs, tenants
from jobs.measure.isolation import Isolation, IsolationError
from jobs.guard.limits import LimitError, Limits
from jobs.measure.runner import run_step
from jobs.contract.spec import SandboxSpec

pytestmark = pytest.mark.measures    # real sandboxes; one worker runs these (tests/conftest.py)

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap is installed by `make test` (tests/system-deps.sh)")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="a root worker's uids: the tests run as root in CI")


@pytest.fixture
def cache_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    root.mkdir()
    monkeypatch.setenv("AUTORESEARCH_CACHE_ROOT", str(root))
    return root


@pytest.fixture
def victim(tmp_path) -> Path:
    """The App's workdir, as an attacker would aim at it: another repository's clone inside."""
    work = tmp_path / "workdir"
    (work / "other-repo").mkdir(parents=True)
    (work / "other-repo" / "private.txt").write_text("the other repository's secret\n")
    return work


def tree(tmp_path: Path, name: str) -> Path:
    t = tmp_path / name
    t.mkdir(parents=True, exist_ok=True)
    return t


def spec(key: str, caches=(), read_only=(), **limits) -> SandboxSpec:
    return SandboxSpec(caches=[str(c) for c in caches], read_only=[str(r) for r in read_only], repo_key=key,
                       limits=Limits(**limits).to_dict() if limits else {})


def untouched(victim: Path) -> None:
    assert sorted(p.name for p in victim.rglob("*")) == ["other-repo", "private.txt"]
    for p in (victim, victim / "other-repo", victim / "other-repo" / "private.txt"):
        assert p.stat().st_uid == os.geteuid(), f"{p} was given to another owner"


@needs_bwrap
def test_a1_a_link_planted_in_one_runs_cache_never_becomes_the_next_runs_backing(tmp_path, cache_root, victim):
    """A1: run 1's build leaves `a/b -> <parent of the workdir>` in its cache; run 2 declares
    `a/b/<workdir name>`. At ea10b95 its backing was made and chowned through the link and bound
    writable: the sandbox got the whole workdir."""
    first = Isolation.from_spec(spec("attacker", [cache_root / "a"]))
    done = run_step(f"ln -s {victim.parent} {cache_root}/a/b && ls -la {cache_root}/a", tree(tmp_path, "t1"), 30,
                    isolation=first, arm="candidate")
    assert done.returncode == 0, done.output
    with pytest.raises(IsolationError, match="is a link"):
        Isolation.from_spec(spec("attacker", [cache_root / "a" / "b" / victim.name]))
    untouched(victim)


@needs_bwrap
def test_a1_a_link_swapped_in_after_the_check_is_not_bound_either(tmp_path, cache_root, victim):
    """The same link planted between the check (from_spec) and the bind (the next step): the
    step does not start, and the workdir is neither seen nor written."""
    iso = Isolation.from_spec(spec("attacker", [cache_root / "x" / "y"]))
    backing = Path(iso.backing(str(cache_root / "x" / "y"), "candidate"))
    shutil.rmtree(backing)
    backing.symlink_to(victim)
    done = run_step(f"touch {cache_root}/x/y/canary; ls {cache_root}/x/y", tree(tmp_path, "t"), 30, isolation=iso)
    assert done.returncode != 0 and "is a link" in done.output, done.output
    untouched(victim)


@needs_bwrap
def test_a1b_nested_declarations_are_refused_before_anything_is_made(tmp_path, cache_root, victim):
    """A1b: `caches: [a/b, a]` (inner first) let the outer cache's build plant the link the next
    experiment's from_spec chowned through. One cache inside another is refused, and so is a
    cache inside (or around) a read-only path."""
    for caches in ([cache_root / "a" / "b", cache_root / "a"], [cache_root / "a", cache_root / "a" / "b"]):
        with pytest.raises(IsolationError, match="another declared cache"):
            Isolation.from_spec(spec("attacker", caches))
    models = cache_root / "models"
    models.mkdir()
    with pytest.raises(IsolationError, match="read-only path"):
        Isolation.from_spec(spec("attacker", [models / "scratch"], [models]))
    assert not (cache_root / "repos").exists() or not any((cache_root / "repos").rglob("a"))


@root_only
def test_a1b_an_existing_link_is_never_chowned_through(tmp_path, cache_root, victim):
    """Even a link that got there some other way (an older version's cache) is refused, and what
    it points at keeps its owner."""
    iso = Isolation.from_spec(spec("attacker", [cache_root / "c"]))
    backing = Path(iso.backing(str(cache_root / "c"), "base"))
    shutil.rmtree(backing)
    backing.symlink_to(victim)
    with pytest.raises(IsolationError, match="is a link"):
        Isolation.from_spec(spec("attacker", [cache_root / "c"]))
    untouched(victim)


def test_links_inside_a_cache_are_not_followed_when_it_changes_owner(tmp_path):
    """`cachedirs.give` walks a cache made for another uid: a link inside it keeps pointing at a
    file that keeps its owner."""
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    cache = tmp_path / "cache"
    (cache / "sub").mkdir(parents=True)
    (cache / "sub" / "obj.o").write_text("x")
    outside = tmp_path / "outside.txt"
    outside.write_text("operator's")
    (cache / "sub" / "escape").symlink_to(outside)
    fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
    try:
        cachedirs.give(fd, 3_100_000)
    finally:
        os.close(fd)
    assert (cache / "sub" / "obj.o").stat().st_uid == 3_100_000 and cache.stat().st_uid == 3_100_000
    assert outside.stat().st_uid == 0


def test_open_beneath_refuses_links_and_climbing(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(cachedirs.CacheDirError, match="is a link"):
        cachedirs.open_beneath(tmp_path, "link/x", create=True)
    assert not (tmp_path / "real" / "x").exists()
    for bad in ("../x", "/etc", "a/../../b"):
        with pytest.raises(cachedirs.CacheDirError, match="not a plain relative path"):
            cachedirs.open_beneath(tmp_path, bad, create=True)
    (tmp_path / "file").write_text("")
    with pytest.raises(cachedirs.CacheDirError, match="not a folder"):
        cachedirs.open_beneath(tmp_path, "file/x", create=True)
    os.close(cachedirs.open_beneath(tmp_path, "made/here", create=True))
    assert (tmp_path / "made" / "here").is_dir()


def test_each_repository_keeps_a_uid_of_its_own(tmp_path):
    spaces = tmp_path / "repos"
    a, b = tenants.uid_for("repo-a", spaces, 3_000_000, 3_000_009), tenants.uid_for("repo-b", spaces, 3_000_000, 3_000_009)
    assert a != b and 3_000_000 <= min(a, b) and max(a, b) <= 3_000_009
    assert tenants.uid_for("repo-a", spaces, 3_000_000, 3_000_009) == a        # kept across runs
    uids = {tenants.uid_for(f"repo-{i}", spaces, 3_000_000, 3_000_009) for i in range(8)} | {a, b}
    assert len(uids) == 10                                                   # never two repositories on one
    with pytest.raises(tenants.TenantError, match="widen the range"):
        tenants.uid_for("repo-eleven", spaces, 3_000_000, 3_000_009)


def test_an_account_of_the_machine_is_never_handed_out(tmp_path):
    with pytest.raises(tenants.TenantError):
        tenants.uid_for("repo", tmp_path, os.geteuid(), os.geteuid())     # this account's own uid


def test_the_uid_range_is_the_operators_and_checked():
    assert Limits.from_env({"AUTORESEARCH_SANDBOX_UIDS": "400000-400099"}).uid_first == 400000
    for bad in ("400000", "5-10", "10-5", "a-b", "1000-4294967295"):
        with pytest.raises(LimitError, match="AUTORESEARCH_SANDBOX_UIDS"):
            Limits.from_env({"AUTORESEARCH_SANDBOX_UIDS": bad})
    with pytest.raises(LimitError, match="replaced by AUTORESEARCH_SANDBOX_UIDS"):
        Limits.from_env({"AUTORESEARCH_SANDBOX_UID": "65534"})


PARK = "for i in $(seq {n}); do sleep 30 & done; echo parked; sleep 30"


@needs_bwrap
@root_only
def test_a4_one_repository_forking_to_its_limit_leaves_another_s_steps_running(tmp_path, cache_root):
    """A4: at ea10b95 every repository ran as uid 65534, so repository A's parked processes made
    repository B's build fail with EAGAIN (`autoresearch-init: exec: Resource temporarily
    unavailable`). Now each has its own uid, so its own process limit."""
    limit = 48
    a = Isolation.from_spec(spec("repo-a", processes=limit))
    b = Isolation.from_spec(spec("repo-b", processes=limit))
    parked: list = []
    hog = threading.Thread(target=lambda: parked.append(
        run_step(PARK.format(n=limit), tree(tmp_path, "a"), 40, isolation=a)), daemon=True)
    hog.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _processes(a.limits.sandbox_uid) < limit - 4:
        time.sleep(0.2)
    assert _processes(a.limits.sandbox_uid) >= limit - 4, "repository A did not reach its limit"
    done = run_step("for i in $(seq 8); do sleep 0.1 & done; wait; echo built", tree(tmp_path, "b"), 30, isolation=b)
    assert done.returncode == 0 and "built" in done.output, done.output
    assert "Resource temporarily unavailable" not in done.output, done.output
    assert a.limits.sandbox_uid != b.limits.sandbox_uid
    denied = run_step("sleep 0.1 & wait; echo built", tree(tmp_path, "a2"), 30, isolation=a)
    assert "Resource temporarily unavailable" in denied.output, "repository A's own limit should still hold"
    subprocess.run(["pkill", "-KILL", "-u", str(a.limits.sandbox_uid)], check=False)
    hog.join(timeout=30)


def _processes(uid: int) -> int:
    count = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    count += 1
            except FileNotFoundError:
                pass
    return count


KEYS = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
    int ring = strcmp(argv[2], "user") == 0 ? -4 : -3;     /* KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING */
    if (strcmp(argv[1], "put") == 0) {
        long id = syscall(SYS_add_key, "user", "tenant-canary", "secret", 6, ring);
        printf(id > 0 ? "stored\n" : "not stored\n");
        return id > 0 ? 0 : 1;
    }
    long id = syscall(SYS_keyctl, 10 /* KEYCTL_SEARCH */, ring, "user", "tenant-canary", 0);
    printf(id > 0 ? "found\n" : "absent\n");
    return 0;
}
"""


@needs_bwrap
def test_a5_no_keyring_carries_a_key_from_one_step_to_another(tmp_path, cache_root):
    """A5: at ea10b95 a root worker's steps shared uid 65534's user keyring (and every step the
    runner's session keyring): repository A's benchmark stored a key, repository B's later
    benchmark read it. Now each step has a user namespace and a session keyring of its own, so
    neither another repository's step nor the same repository's next benchmark process finds it."""
    if subprocess.run(["cc", "--version"], capture_output=True).returncode != 0:
        pytest.skip("needs a C compiler")
    tool = tree(tmp_path, "tool")
    (tool / "keys.c").write_text(KEYS)
    subprocess.run(["cc", "-o", str(tool / "keys"), str(tool / "keys.c")], check=True)
    os.chmod(tool, 0o755)
    os.chmod(tool / "keys", 0o755)
    a = Isolation.from_spec(spec("repo-a"))
    b = Isolation.from_spec(spec("repo-b"))
    for ring in ("user", "session"):
        stored = run_step(f"{tool}/keys put {ring}", tool, 30, isolation=a, step="benchmark")
        if "not stored" in stored.output:
            pytest.skip("this kernel (or its seccomp policy) refuses keys to the sandbox: no channel either")
        assert "stored" in stored.output, stored.output
        for other in (b, a):
            seen = run_step(f"{tool}/keys get {ring}", tool, 30, isolation=other, step="benchmark")
            assert seen.output.strip() == "absent", (ring, seen.output)


@needs_bwrap
@root_only
def test_two_repositories_at_once_one_forking_to_its_limit_leave_the_others_verdicts_alone(
        tmp_path, cache_root, monkeypatch):
    """The done-when of issue 41: repository A parks processes up to the operator's limit while
    repository B's whole run (calibration, build, checks, benchmark pairs, stack) goes on beside
    it. At ea10b95 both were uid 65534 and B's steps failed with EAGAIN (build_failed / crash,
    someone else's verdict); now B's run builds, checks and measures every step it started."""
    from jobs.run.pipeline import Run, RunOptions
    from synthetic import FASTER, patch_for, synthetic_target
    limit = 64
    monkeypatch.setenv("AUTORESEARCH_LIMIT_PROCESSES", str(limit))
    a = Isolation.from_spec(spec("owner/repo-a", processes=limit))
    hog = threading.Thread(target=lambda: run_step(PARK.format(n=limit).replace("30", "600"), tree(tmp_path, "a"),
                                                   600, isolation=a), daemon=True)
    hog.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _processes(a.limits.sandbox_uid) < limit - 4:
            time.sleep(0.2)
        assert _processes(a.limits.sandbox_uid) >= limit - 4, "repository A did not reach its limit"
        t = synthetic_target(tmp_path / "b")
        patch = patch_for(t, tmp_path / "faster.patch", {"src/speed.txt": FASTER})
        summary = Run(RunOptions(target=t, out=tmp_path / "out", run_id="tenants", agent="none", candidates=[patch],
                                 repo_identity="owner/repo-b")).execute()
        assert _processes(a.limits.sandbox_uid) >= limit - 4, "repository A let go before B's run ended"
    finally:
        subprocess.run(["pkill", "-KILL", "-u", str(a.limits.sandbox_uid)], check=False)
        hog.join(timeout=30)
    assert summary.sandboxed is True
    [experiment] = summary.experiments
    assert experiment.status not in ("build_failed", "checks_failed", "crash", "timeout"), experiment
    assert "Resource temporarily unavailable" not in str(experiment), experiment
    assert experiment.status == "keep", experiment      # the 2x candidate, as without a neighbour
