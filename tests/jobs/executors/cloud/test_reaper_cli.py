"""The reaper (clusters with the app prefix that no live run owns are downed) and the CLI:
`autoresearch reap [--dry-run]`, `autoresearch run ... --executor skypilot --dry-run`."""
from __future__ import annotations

import json

import cloud_helpers  # noqa: F401  (before sky is imported)
import pytest
import yaml

from cloud_helpers import config_for, options, spec_for
from conftest import git
from fakes.sky_fake import FakeSky
from jobs import cli
from jobs.executors.cloud import reaper, tasks
from jobs.executors.cloud.leases import VmLease, live_prefixes, read_leases
from jobs.executors.skypilot import make_skypilot_executors
from synthetic import patch_for, synthetic_target


def put_up(fake, tmp_path, *names):
    """Clusters in the fake's books, as if launched earlier (by this or another process)."""
    import sky
    for name in names:
        task = sky.Task(run="true", workdir=str(tmp_path))
        fake.get(fake.launch(task, cluster_name=name, down=True))


def lease(tmp_path, run_id, *, age_s=0.0, phase=None):
    out = tmp_path / "runs" / run_id
    out.mkdir(parents=True, exist_ok=True)
    if phase:
        (out / "state.json").write_text(json.dumps({"run_id": run_id, "phase": phase}))
    lz = VmLease(run_id, tasks.run_prefix(run_id), out, tmp_path / "leases")
    lz._write_locked()
    if age_s:
        data = json.loads(lz.path.read_text())
        data["updated"] -= age_s
        lz.path.write_text(json.dumps(data))
    return lz


@pytest.fixture()
def world(tmp_path):
    fake = FakeSky(tmp_path / "fake", job="canned")
    put_up(fake, tmp_path,
           "autoresearch-live-exp-x86-a1",        # owned by a live run
           "autoresearch-stale-exp-arm-a1",       # its run stopped heartbeating 20 minutes ago
           "autoresearch-done-stack-x86-a1",      # its run finished (state.json phase done)
           "autoresearch-nolease-calibration-x86-a1",   # no lease at all (a killed worker)
           "someone-elses-cluster")               # not ours: never touched
    lease(tmp_path, "live", phase="experiments")
    lease(tmp_path, "stale", age_s=1200, phase="experiments")
    lease(tmp_path, "done", phase="done")
    return fake


def test_live_means_fresh_lease_and_unfinished_run(tmp_path, world):
    assert live_prefixes(tmp_path / "leases") == ["autoresearch-live-"]
    assert set(live_prefixes(tmp_path / "leases", ttl_s=3600)) == {"autoresearch-live-", "autoresearch-stale-"}


def test_dry_run_lists_and_downs_nothing(tmp_path, world):
    report = reaper.reap(world, lease_dir=tmp_path / "leases", dry_run=True)
    assert report.owned == ["autoresearch-live-exp-x86-a1"]
    assert report.orphans == ["autoresearch-done-stack-x86-a1", "autoresearch-nolease-calibration-x86-a1",
                              "autoresearch-stale-exp-arm-a1"]
    assert world.called("down") == [] and len(world.up()) == 5


def test_reap_downs_orphans_only(tmp_path, world):
    world.inject("down_error", match="-done-")             # one stuck teardown must not shield others
    report = reaper.reap(world, lease_dir=tmp_path / "leases")
    assert sorted(world.up()) == ["autoresearch-done-stack-x86-a1", "autoresearch-live-exp-x86-a1",
                                  "someone-elses-cluster"]
    assert list(report.failed) == ["autoresearch-done-stack-x86-a1"]
    assert reaper.reap(world, lease_dir=tmp_path / "leases").failed == {}    # next pass gets it
    assert sorted(world.up()) == ["autoresearch-live-exp-x86-a1", "someone-elses-cluster"]


def test_a_running_executor_holds_a_live_lease_and_a_closed_one_none(tmp_path):
    repo = synthetic_target(tmp_path / "target")
    base = git(repo, "rev-parse", "HEAD")
    fake = FakeSky(tmp_path / "fake", job="canned")
    x86, arm = make_skypilot_executors(repo, tmp_path / "out" / "work", config_for(repo), "r7", sdk=fake,
                                       options=options(tmp_path))
    seen = {}

    def progress(message, fraction):
        if fake.up() and "owned" not in seen:
            # Mid-experiment, a reaper elsewhere must leave this run's VM alone.
            seen["owned"] = reaper.reap(fake, lease_dir=tmp_path / "leases").owned
    assert x86.run(spec_for(x86.config, base), progress).status == "ok"
    assert seen["owned"] and seen["owned"][0].startswith("autoresearch-r7-exp-x86-")
    (data,) = read_leases(tmp_path / "leases")
    assert data["run_id"] == "r7" and data["out"] == str(tmp_path / "out") and data["clusters"] == []
    x86.close()
    arm.close()
    assert read_leases(tmp_path / "leases") == []


def test_cli_reap(tmp_path, world, monkeypatch, capsys):
    monkeypatch.setattr(reaper, "_sdk", lambda: world)
    code = cli.main(["reap", "--dry-run", "--lease-dir", str(tmp_path / "leases")])
    out = capsys.readouterr().out
    assert code == 0 and "1 owned by a live run, 3 orphaned" in out and "would down" in out
    assert world.called("down") == []
    assert cli.main(["reap", "--lease-dir", str(tmp_path / "leases")]) == 0
    assert sorted(world.up()) == ["autoresearch-live-exp-x86-a1", "someone-elses-cluster"]


def test_cli_run_dry_run_prints_valid_tasks_and_estimate_and_launches_nothing(tmp_path, monkeypatch, capsys):
    import sky
    repo = synthetic_target(tmp_path / "target")
    path = repo / ".github" / "autoresearch.yml"
    data = yaml.safe_load(path.read_text())
    data["platforms"] = ["x86", "arm"]
    path.write_text(yaml.safe_dump(data))
    git(repo, "commit", "-qam", "cloud")
    patch = patch_for(repo, tmp_path / "p.patch", {"src/speed.txt": "101\n"})   # preflight checks it applies

    def refuse(*a, **k):
        raise AssertionError("a dry run must not launch")
    monkeypatch.setattr(sky, "launch", refuse)
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_dryrunsecret123456")
    code = cli.main(["run", str(repo), "--executor", "skypilot", "--dry-run", "--agent", "none",
                     "--candidate", str(patch), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0, out
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert len(docs) == 6                                   # calibration, experiment, stack x 2 platforms
    for doc in docs:
        tasks.validate(doc)           # SkyPilot's own validation (on a copy)
    assert {d["resources"]["instance_type"] for d in docs} == {"c6i.2xlarge", "c7g.2xlarge"}
    assert "# ===== estimate" in out and "worst case" in out and "within the budget" in out
    assert "ghs_dryrunsecret123456" not in out
    assert not (tmp_path / "out" / "state.json").exists()


def test_cli_dry_run_needs_the_cloud_executor(tmp_path, capsys):
    repo = synthetic_target(tmp_path / "target")
    patch = patch_for(repo, tmp_path / "p.patch", {"src/speed.txt": "101\n"})   # preflight checks it applies
    assert cli.main(["run", str(repo), "--dry-run", "--agent", "none", "--candidate", str(patch)]) == 2
    assert "--executor skypilot" in capsys.readouterr().out
