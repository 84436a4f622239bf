"""Every task the SkyPilot executor can generate passes SkyPilot's own schema validation, offline,
carries no credentials, and ships a workdir the VM can run."""
from __future__ import annotations

import subprocess

import cloud_helpers  # noqa: F401  (before sky is imported)
import pytest
import yaml
from sky.utils import common_utils

from cloud_helpers import config_for, spec_for, target  # noqa: F401  (target: a fixture)
from conftest import git
from jobs.executors.cloud import catalog, tasks
from jobs.contract.plan import make_plan


PLATFORMS = [("x86", "c6i.2xlarge", "aws", False), ("arm", "c7g.2xlarge", "aws", False),
             ("arm", "c7g.2xlarge", "aws", True)]


@pytest.mark.parametrize("platform,instance_type,cloud,spot", PLATFORMS)
@pytest.mark.parametrize("kind", ["calibration", "experiment", "stack"])
def test_every_task_passes_skypilot_validation(target, tmp_path, platform, instance_type, cloud, spot, kind):
    import sky
    repo, base, head = target
    config = config_for(repo)
    spec = spec_for(config, base, base if kind == "calibration" else head, name=kind, platform=platform,
                    kind=kind)
    workdir = tasks.stage_workdir(spec, repo, tmp_path / "stage")
    task_yaml = tasks.task_config(spec, workdir=workdir, instance_type=instance_type, cloud=cloud, use_spot=spot)
    # What SkyPilot gets is exactly what --dry-run prints: round-trip the YAML text.
    text = tasks.to_yaml(task_yaml)
    task = sky.Task.from_yaml_config(yaml.safe_load(text))
    (res,) = task.resources
    assert res.instance_type == instance_type and str(res.cloud).lower() == "aws"
    assert res.use_spot is spot
    assert task.workdir == str(workdir) and task.run == tasks.RUN and task.setup == tasks.SETUP
    assert task_yaml["resources"]["autostop"] == {"idle_minutes": 10, "down": True}
    assert task.envs["AUTORESEARCH_PLATFORM"] == platform


def test_the_workdir_holds_the_bundle_the_driver_and_the_spec(target, tmp_path):
    repo, base, head = target
    spec = spec_for(config_for(repo), base, head)
    stage = tasks.stage_workdir(spec, repo, tmp_path / "stage")
    assert (stage / "spec.json").read_text() == spec.to_json()
    assert (stage / "jobs" / "measure" / "runner.py").is_file() and not list(stage.rglob("__pycache__"))
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(stage / "repo.bundle"), str(clone)], check=True)
    for commit in (base, head):
        assert git(clone, "cat-file", "-t", commit) == "commit"
    # The target's own refs are untouched (the bundle's refs live in a scratch repository).
    assert "base" not in git(repo, "for-each-ref", "--format=%(refname)")


def test_no_credentials_reach_the_vm(target, tmp_path, monkeypatch):
    repo, base, head = target
    secrets = {"GITHUB_TOKEN": "ghs_supersecretinstallationtoken", "ANTHROPIC_API_KEY": "sk-ant-secret-0123456789",
               "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "GH_APP_PRIVATE_KEY": "-----BEGIN x"}
    for k, v in secrets.items():
        monkeypatch.setenv(k, v)
    spec = spec_for(config_for(repo), base, head)
    stage = tasks.stage_workdir(spec, repo, tmp_path / "stage")
    config = tasks.task_config(spec, workdir=stage, instance_type="c6i.2xlarge")
    text = tasks.to_yaml(config)
    assert not [k for k in config["envs"] if any(w in k for w in ("TOKEN", "KEY", "SECRET", "PASSWORD"))]
    blobs = [p.read_bytes() for p in stage.rglob("*") if p.is_file()]
    for value in secrets.values():
        assert value not in text
        assert not any(value.encode() in b for b in blobs)
    # And the guard refuses a task that would carry one.
    bad = dict(config, envs={**config["envs"], "GITHUB_TOKEN": "x"})
    with pytest.raises(tasks.SecretLeak):
        tasks.assert_no_secrets(bad)
    leaky = dict(config, run=config["run"] + f"\necho {secrets['ANTHROPIC_API_KEY']}\n")
    with pytest.raises(tasks.SecretLeak):
        tasks.assert_no_secrets(leaky)


def test_cluster_names_are_valid_and_carry_run_experiment_platform():
    name = tasks.cluster_name("20261130-011922-abc1234", "fuse_rms_norm+mul (v2)", "x86", "3f2a1")
    assert name == "autoresearch-20261130-011922-abc1234-fuse-rms-norm-mul-v2-x86-3f2a1"
    assert name.startswith(tasks.run_prefix("20261130-011922-abc1234"))
    common_utils.check_cluster_name_is_valid(name)
    common_utils.check_cluster_name_is_valid(tasks.cluster_name("R/1", "__", "ARM", 1))


def test_catalog_prices_come_from_the_shipped_skypilot_catalog():
    assert catalog.hourly_price("c6i.2xlarge") == 0.34
    assert catalog.hourly_price("c7g.2xlarge") == 0.29       # highest of 0.29 / 0.289: never undershoot
    assert 0 < catalog.hourly_price("c7g.2xlarge", spot=True) < 0.29
    assert catalog.lookup("c7g.2xlarge").arch == "arm64" and catalog.lookup("c6i.2xlarge").arch == "x86_64"
    with pytest.raises(catalog.CatalogError, match="not in the shipped catalog"):
        catalog.hourly_price("p5.48xlarge")
    header = catalog.VMS_CSV.read_text().splitlines()[0]
    assert header == ("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,"
                      "Region,AvailabilityZone,Arch")


def test_plan_estimate_uses_catalog_prices(target):
    repo, _, _ = target
    plan = make_plan(config_for(repo), 4, cloud=True, minutes_per_experiment=60,
                     hourly_usd=catalog.hourly_price)
    assert plan.instance_types == ("c6i.2xlarge", "c7g.2xlarge")
    assert plan.est_usd == round(6 * (0.34 + 0.29), 2)


def test_offline_home_is_laid_out_like_skypilots(tmp_path):
    home = catalog.offline_sky_home(tmp_path / "h")
    assert (home / ".sky" / "catalogs" / "v8" / "aws" / "vms.csv").read_bytes() == catalog.VMS_CSV.read_bytes()
    assert not (home / ".sky" / "catalogs" / "v8" / ".meta").exists()


def test_unknown_instance_type_is_a_config_error_not_a_crash(target, tmp_path):
    from jobs.executors import ExecutorUnavailable
    from jobs.executors.skypilot import make_skypilot_executors
    from cloud_helpers import options
    repo, _, _ = target
    config = config_for(repo, platforms=[{"name": "x86", "instance_type": "m7i.48xlarge"}])
    with pytest.raises(ExecutorUnavailable, match="m7i.48xlarge.*not in the shipped catalog"):
        make_skypilot_executors(repo, tmp_path / "w", config, "r1", sdk=object(), options=options(tmp_path))
    with pytest.raises(ExecutorUnavailable, match="set instance_type"):
        make_skypilot_executors(repo, tmp_path / "w", config_for(repo, platforms=["riscv"]), "r1", sdk=object(),
                                options=options(tmp_path))
