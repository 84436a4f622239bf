"""An ExperimentSpec as one SkyPilot task: name, workdir, setup, run, envs, resources.

The task is plain data (a dict in SkyPilot's task YAML schema), so `--dry-run` can print it and
tests can validate it with SkyPilot's own `sky.Task.from_yaml_config`. Its workdir, synced to the
VM by SkyPilot, holds exactly three things:

    repo.bundle   the target's base and candidate commits (a git bundle; no working tree, no
                  untracked files, so nothing the target did not commit reaches the VM)
    jobs/         this project's `jobs` package (*.py only): the on-machine driver jobs.measure.runner
    spec.json     the ExperimentSpec

`setup` installs what the driver needs (python3 + venv with numpy/scipy/pydantic/pyyaml, git, a
compiler, cmake); `run` clones the bundle and runs `python -m jobs.measure.runner spec.json`, which prints
`PROGRESS`, one `RESULT <json>` and `EXPERIMENT_STATUS:` lines. Credentials never reach the VM:
the envs carry only names and ids, and `assert_no_secrets` refuses a task whose text contains the
value of any secret-looking variable of this process.
"""
from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from jobs.guard.secrets import TASK_MIN_LEN, leaked_names, secret_values
from jobs.contract.spec import ExperimentSpec
from jobs.executors.cloud import APP_PREFIX

JOBS_PACKAGE = Path(__file__).resolve().parents[2]
REMOTE_VENV = "$HOME/autoresearch-venv"
# What jobs.measure.runner imports beyond the stdlib, pinned as in pyproject.toml.
RUNNER_REQUIREMENTS = ("numpy>=1.26,<3", "scipy>=1.11,<2", "pydantic>=2.6,<3", "pyyaml>=6,<7")

SETUP = f"""\
set -euo pipefail
if command -v apt-get >/dev/null 2>&1; then
  sudo DEBIAN_FRONTEND=noninteractive apt-get update -qq
  sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv python3-pip git \\
    build-essential cmake bubblewrap >/dev/null
fi
python3 -m venv {REMOTE_VENV}
{REMOTE_VENV}/bin/pip install -q --upgrade pip
{REMOTE_VENV}/bin/pip install -q {' '.join(f"'{r}'" for r in RUNNER_REQUIREMENTS)}
"""

RUN = f"""\
set -euo pipefail
PY={REMOTE_VENV}/bin/python
[ -x "$PY" ] || PY=python3
rm -rf target work
git clone -q --no-checkout repo.bundle target
exec "$PY" -m jobs.measure.runner spec.json --repo "$PWD/target" --work "$PWD/work"
"""

SLUG = re.compile(r"[^a-z0-9]+")


def slug(text: str, limit: int = 40) -> str:
    return SLUG.sub("-", text.lower()).strip("-")[:limit].strip("-") or "x"


def run_prefix(run_id: str) -> str:
    """Every cluster of this run starts with this (what the reaper matches leases against)."""
    return f"{APP_PREFIX}-{slug(run_id, 40)}-"


def cluster_name(run_id: str, experiment: str, platform: str, n: int | str) -> str:
    """`autoresearch-<run>-<experiment>-<platform>-<n>`: lowercase letters, digits and dashes,
    starting with a letter (valid for SkyPilot on every cloud)."""
    return f"{run_prefix(run_id)}{slug(experiment, 24)}-{slug(platform, 8)}-{slug(str(n), 12)}"


def job_seconds(spec: ExperimentSpec, slack: float = 120.0) -> float:
    """The longest the on-machine driver may take: every step at its own time limit (two builds,
    checks, every benchmark invocation plus its ~1 s probe) and `slack` for clone and worktrees.
    The VM job is killed past it, so it bounds what the job can cost."""
    builds = 2     # the A/A calibration builds a twin of the base as well
    invocations = 2 * (spec.n_per_arm + spec.warmup)
    checks = spec.checks_timeout if spec.run_checks else 0.0
    return builds * spec.build_timeout + checks + invocations * (spec.benchmark_timeout + 1.0) + slack


def envs(spec: ExperimentSpec) -> dict[str, str]:
    return {"AUTORESEARCH_RUN_ID": spec.run_id, "AUTORESEARCH_EXPERIMENT": spec.name,
            "AUTORESEARCH_PLATFORM": spec.platform, "PYTHONUNBUFFERED": "1", "PYTHONPATH": "."}


def task_config(spec: ExperimentSpec, *, workdir: Path, instance_type: str, cloud: str = "aws",
                use_spot: bool = False, idle_minutes: int = 10, name: str | None = None,
                disk_size: int = 64) -> dict[str, Any]:
    """The SkyPilot task YAML (as a dict) for one experiment on one instance type.

    `autostop: {idle_minutes, down: true}` is the safety net: a VM whose controller died is torn
    down after that many idle minutes even if nobody calls `sky.down`."""
    config = {
        "name": name or f"{APP_PREFIX}-{slug(spec.name, 24)}-{slug(spec.platform, 8)}",
        "workdir": str(workdir),
        "resources": {
            "cloud": cloud,
            "instance_type": instance_type,
            "use_spot": use_spot,
            "disk_size": disk_size,
            "autostop": {"idle_minutes": int(idle_minutes), "down": True},
        },
        "envs": envs(spec),
        "setup": SETUP,
        "run": RUN,
    }
    assert_no_secrets(config)
    return config


class SecretLeak(RuntimeError):
    pass


def assert_no_secrets(config: dict[str, Any], environ: dict[str, str] | None = None) -> None:
    """Refuse a task that would carry a credential to the VM (names are checked, values too)."""
    bad = leaked_names(config.get("envs", {}))
    if bad:
        raise SecretLeak(f"task envs must not carry credentials: {bad}")
    text = yaml.safe_dump(config)
    if any(v in text for v in secret_values(environ=environ, min_len=TASK_MIN_LEN)):
        raise SecretLeak("task text contains the value of a secret environment variable")


def validate(config: dict[str, Any], sky=None):
    """SkyPilot's own schema validation; returns the sky.Task. Raises SkyPilot's error.
    (`from_yaml_config` consumes its argument, hence the copy.)"""
    import copy
    if sky is None:
        import sky
    return sky.Task.from_yaml_config(copy.deepcopy(config))


# -- the workdir ---------------------------------------------------------------------------

def _git(cwd: Path, *args: str) -> str:
    """git hardened like every other git process of the worker (jobs/guard/gitops.py)."""
    from jobs.guard import gitops
    return gitops.git(cwd, *args)


def write_bundle(repo: Path, commits: dict[str, str], dest: Path) -> Path:
    """A git bundle of `commits` ({branch: sha}) without touching `repo`'s refs: the refs live
    in a scratch repository that borrows `repo`'s objects (git alternates)."""
    objects = Path(_git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "objects"
    with tempfile.TemporaryDirectory(prefix="ar-bundle-") as tmp:
        scratch = Path(tmp)
        _git(scratch, "init", "-q")
        (scratch / ".git" / "objects" / "info" / "alternates").write_text(f"{objects}\n")
        for branch, sha in commits.items():
            _git(scratch, "update-ref", f"refs/heads/{branch}", sha)
        _git(scratch, "bundle", "create", "-q", str(dest), *(f"refs/heads/{b}" for b in commits))
    return dest


def copy_jobs_package(dest: Path) -> Path:
    target = dest / "jobs"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(JOBS_PACKAGE, target, ignore=lambda d, names: [
        n for n in names if not (n.endswith(".py") or (Path(d, n).is_dir() and n != "__pycache__"))])
    return target


def stage_workdir(spec: ExperimentSpec, repo: Path | None, dest: Path) -> Path:
    """Fill `dest` with what the VM needs (see the module docstring); `repo=None` leaves the
    bundle out (a `--dry-run` preview)."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if repo is not None:
        commits = {"base": spec.base_commit}
        if spec.head_commit != spec.base_commit:
            commits["head"] = spec.head_commit
        write_bundle(Path(repo), commits, dest / "repo.bundle")
    copy_jobs_package(dest)
    (dest / "spec.json").write_text(spec.to_json(), encoding="utf-8")
    return dest


# -- YAML for people -----------------------------------------------------------------------

class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(config: dict[str, Any]) -> str:
    return yaml.dump(config, Dumper=_Dumper, sort_keys=False, width=100)
