"""Shared setup for tests/jobs/executors/cloud: import this before anything that imports `sky`.

SkyPilot must never reach the network or start its local API server here: the local server is
disabled, and SkyPilot's home points at a folder holding only our shipped catalog (so validating
a task with an instance_type reads that instead of downloading the AWS catalog).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("sky") is None:      # found without importing it (the env comes first)
    pytest.skip("tests/jobs/executors/cloud need the cloud extra: pip install -e '.[cloud]'", allow_module_level=True)
os.environ["SKYPILOT_DISABLE_LOCAL_API_SERVER"] = "1"
os.environ.setdefault("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")

from jobs.executors.cloud import catalog  # noqa: E402

if "sky" not in sys.modules:
    catalog.use_offline_catalog()

from jobs.contract.config import parse_config  # noqa: E402
from jobs.executors.skypilot import CloudOptions  # noqa: E402
from jobs.contract.spec import ExperimentSpec  # noqa: E402
from conftest import git  # noqa: E402
from synthetic import synthetic_target  # noqa: E402

FAST = dict(heartbeat_s=0.02, down_backoff_s=0.0, provision_timeout_s=900.0)


def options(tmp_path: Path, **kw) -> CloudOptions:
    return CloudOptions(lease_dir=tmp_path / "leases", **{**FAST, **kw})


def config_for(repo: Path, **overrides):
    """The synthetic target's config, with cloud platforms and any top-level overrides."""
    import yaml
    data = yaml.safe_load((repo / ".github" / "autoresearch.yml").read_text())
    data.setdefault("platforms", ["x86", "arm"])
    data.update(overrides)
    return parse_config(yaml.safe_dump(data))


def spec_for(config, base: str, head: str | None = None, *, name="exp", platform="x86", n=4,
             kind="experiment", **kw) -> ExperimentSpec:
    return ExperimentSpec.from_config(config, run_id="r1", name=name, platform=platform, base_commit=base,
                                      head_commit=head or base, n_per_arm=n, kind=kind, **kw)


@pytest.fixture()
def target(tmp_path):
    """The synthetic target with a faster commit: (repo, base, head), checked out at base."""
    repo = synthetic_target(tmp_path / "target")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "src" / "speed.txt").write_text("110\n")
    git(repo, "commit", "-qam", "faster")
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "reset", "-q", "--hard", base)
    return repo, base, head
