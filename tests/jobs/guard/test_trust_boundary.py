"""Issue 20, the trusted side: what a repository controls (its config, its build, its benchmark's
output) cannot switch the sandbox off, reach another repository's caches or the sandbox's init,
read the operator's variables or root's files, or exhaust the machine. Real bubblewrap, real git,
real builds; each test asserts the attack's evidence is absent. (The App end to end: tests/bot/
test_trust_boundary_app.py.)"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, git
from jobs.guard import sandbox, sandboxinit
from jobs.guard.limits import Limits
from jobs.guard.operator import OperatorError, OperatorPolicy
from jobs.measure.isolation import Isolation, IsolationError, backings, repo_key
from jobs.measure.runner import run_step
from jobs.contract.events import RunWarning
from jobs.contract.spec import SandboxSpec
from synthetic import FASTER, patch_for, synthetic_target

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap is installed by `make test` (tests/system-deps.sh)")
ROOT_WORKER = os.geteuid() == 0


@pytest.fixture()
def cache_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    root.mkdir()
    monkeypatch.setenv("AUTORESEARCH_CACHE_ROOT", str(root))
    return root


def tree(tmp_path: Path, name: str = "tree") -> Path:
    t = tmp_path / name
    t.mkdir(parents=True, exist_ok=True)
    return t


# -- F1a: the repository cannot switch the sandbox off -------------------------------------------
def test_only_the_operator_switches_the_sandbox_off():
    app = OperatorPolicy(face="app")
    sandboxed, by, warning = app.sandbox_decision(repo_enabled=False)
    assert sandboxed and not by and "only the operator" in warning and "AUTORESEARCH_ALLOW_UNSANDBOXED" in warning
    assert OperatorPolicy(face="cli").sandbox_decision(False)[2].count("--no-sandbox") == 1
    assert OperatorPolicy(face="cli").sandbox_decision(True, cli_no_sandbox=True)[:2] == (False, "--no-sandbox (the operator)")
    trusted = OperatorPolicy(face="app", allow_unsandboxed=True)
    assert trusted.sandbox_decision(True) == (True, "", "")          # allowing it turns nothing off by itself
    assert trusted.sandbox_decision(False)[0] is False and "allowed by the operator" in trusted.sandbox_decision(False)[1]


def test_operator_settings_come_from_the_operators_environment_and_are_checked():
    p = OperatorPolicy.from_env({"AUTORESEARCH_ALLOW_UNSANDBOXED": "1", "AUTORESEARCH_SANDBOX_ENV": "MODEL, THREADS",
                                 "AUTORESEARCH_LIMIT_OUTPUT_MIB": "4"}, face="app", protected=["/w"])
    assert p.allow_unsandboxed and p.env_allow == ("MODEL", "THREADS") and p.limits.output_mib == 4
    assert p.protected == ("/w",)
    assert OperatorPolicy.from_env({}, face="app") == OperatorPolicy(face="app")     # strict defaults
    for env, what in [({"AUTORESEARCH_ALLOW_UNSANDBOXED": "maybe"}, "ALLOW_UNSANDBOXED"),
                      ({"AUTORESEARCH_SANDBOX_ENV": "A-B"}, "SANDBOX_ENV"),
                      ({"AUTORESEARCH_LIMIT_MEMORY_MIB": "lots"}, "LIMIT_MEMORY_MIB"),
                      ({"AUTORESEARCH_LIMIT_PROCESSES": "0"}, "LIMIT_PROCESSES")]:
        with pytest.raises(OperatorError, match=what):
            OperatorPolicy.from_env(env, face="app")


def test_the_apps_settings_carry_the_operator_policy_past_the_scrub(tmp_path):
    from bot.settings import Settings, SettingsError
    from jobs.guard.secrets import scrub_environment
    env = {"AUTORESEARCH_APP_ID": "1", "AUTORESEARCH_PRIVATE_KEY_PATH": str(tmp_path / "k.pem"),
           "AUTORESEARCH_WEBHOOK_SECRET": "s", "AUTORESEARCH_WORKDIR": str(tmp_path / "work"),
           "AUTORESEARCH_SANDBOX_ENV": "MODEL"}
    s = Settings.from_env(env)
    job_env = dict(env)
    scrub_environment(job_env)                   # what the job does before the pipeline starts
    assert "AUTORESEARCH_SANDBOX_ENV" not in job_env
    assert s.operator.env_allow == ("MODEL",) and not s.operator.allow_unsandboxed
    assert s.operator.protected == (str(tmp_path / "work"),)
    assert Settings.for_action({"AUTORESEARCH_ALLOW_UNSANDBOXED": "1"}).operator.allow_unsandboxed
    with pytest.raises(SettingsError, match="AUTORESEARCH_ALLOW_UNSANDBOXED"):
        Settings.from_env({**env, "AUTORESEARCH_ALLOW_UNSANDBOXED": "sometimes"})


# -- N8: the environment is the operator's allow-list intersected with the repository's ask -------
def test_env_is_the_intersection_and_never_a_credential():
    p = OperatorPolicy(env_allow=("MODEL_PATH", "GITHUB_TOKEN", "THREADS"))
    given, refused = p.allowed_env(["MODEL_PATH", "DATABASE_URL", "GITHUB_TOKEN", "MODEL_PATH"])
    assert given == ["MODEL_PATH"] and refused == ["DATABASE_URL", "GITHUB_TOKEN"]


@needs_bwrap
def test_a_hostile_repository_gets_neither_the_value_nor_a_report_line_of_an_unallowed_variable(
        tmp_path, monkeypatch, cache_root):
    """Through the CLI's pipeline: the repository asks for DATABASE_URL (set on this machine) and
    for sandbox: {enabled: false}; its build dumps its environment where the test can read it."""
    from jobs.run.pipeline import Run, RunOptions
    canary = "postgres://operator:hunter2-canary@db.internal/prod"
    monkeypatch.setenv("DATABASE_URL", canary)
    monkeypatch.setenv("SYN_MODEL", "/models/secret-name-of-model.gguf")
    monkeypatch.setenv("AUTORESEARCH_SANDBOX_ENV", "SYN_MODEL")     # the operator allows only this one
    monkeypatch.delenv("AUTORESEARCH_ALLOW_UNSANDBOXED", raising=False)
    t = synthetic_target(tmp_path / "t")
    dump = cache_root / "dump"
    (t / "build.sh").write_text(f"env > {dump}/env.txt; id >> {dump}/env.txt\n" + (t / "build.sh").read_text())
    cfg = t / ".github" / "autoresearch.yml"
    cfg.write_text(cfg.read_text() + f"sandbox: {{enabled: false, caches: ['{dump}'], env: [DATABASE_URL, SYN_MODEL]}}\n")
    git(t, "add", "-A")
    git(t, "commit", "-qm", "a repository that asks for too much")
    patch = patch_for(t, tmp_path / "faster.patch", {"src/speed.txt": FASTER})
    events = []
    summary = Run(RunOptions(target=t, out=tmp_path / "out", run_id="n8", agent="none", candidates=[patch]),
                  on_event=events.append).execute()
    assert summary.sandboxed is True                              # F1a: the ask was not honoured
    warnings = " ".join(e.message for e in events if isinstance(e, RunWarning))
    assert "only the operator can turn the sandbox off" in warnings and "DATABASE_URL" in warnings
    seen = "".join((d / "env.txt").read_text() for d in backings(dump))
    assert "SYN_MODEL=/models/secret-name-of-model.gguf" in seen       # allowed and asked: given
    assert canary not in seen and "DATABASE_URL" not in seen            # asked, not allowed: absent
    assert not (dump / "env.txt").exists()                             # nothing ran outside the sandbox
    pr = (tmp_path / "out" / "pr.md").read_text()
    assert 'SYN_MODEL="$SYN_MODEL"' in pr and "secret-name-of-model" not in pr and canary not in pr
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert b"hunter2-canary" not in path.read_bytes() and b"secret-name-of-model" not in path.read_bytes(), path


# -- N1, N2: caches are per repository and never reach the trusted side ---------------------------
def test_declared_paths_that_reach_the_trusted_side_are_refused(tmp_path, cache_root):
    work = cache_root / "bot"                         # the App's workdir under the cache root, as by default
    (work / "octo" / "synth" / "run" / "repo").mkdir(parents=True)
    (cache_root / "models").mkdir()
    spec = dict(repo_key=repo_key("octo/synth"), protect=[str(work)])
    cases = {
        "the cache root itself": SandboxSpec(caches=[str(cache_root)], **spec),
        "the cache root, as ~/.. of a cache": SandboxSpec(read_only=[str(cache_root)], **spec),
        "a folder containing the workdir": SandboxSpec(caches=[str(work / "octo")], **spec),
        "the workdir": SandboxSpec(read_only=[str(work)], **spec),
        "a folder inside a run": SandboxSpec(caches=[str(work / "octo" / "synth" / "run" / "repo" / ".git")], **spec),
        "the namespaces": SandboxSpec(caches=[str(cache_root / "repos")], **spec),
        "another repository's namespace": SandboxSpec(
            read_only=[str(cache_root / "repos" / repo_key("other/repo"))], **spec),
    }
    (cache_root / "repos" / repo_key("other/repo")).mkdir(parents=True)
    for what, bad in cases.items():
        with pytest.raises(IsolationError) as err:
            Isolation.from_spec(bad)
        assert "sandbox." in str(err.value), what
    (cache_root / "link").symlink_to(work)            # through a symlink, the same
    with pytest.raises(IsolationError, match="contains or lies in"):
        Isolation.from_spec(SandboxSpec(read_only=[str(cache_root / "link")], **spec))
    ok = Isolation.from_spec(SandboxSpec(caches=[str(cache_root / "ccache")], read_only=[str(cache_root / "models")], **spec))
    assert ok.caches == (str(cache_root / "ccache"),)


@needs_bwrap
def test_caches_are_per_repository_and_per_arm(tmp_path, cache_root):
    view = str(cache_root / "ccache")
    mallory = Isolation.from_spec(SandboxSpec(caches=[view], repo_key=repo_key("mallory/evil")))
    alice = Isolation.from_spec(SandboxSpec(caches=[view], repo_key=repo_key("alice/llama")))
    t = tree(tmp_path)
    planted = run_step(f"echo poisoned > {view}/obj.o && echo WROTE", t, 30, isolation=mallory, arm="candidate")
    assert "WROTE" in planted.output
    for who, arm in ((alice, "candidate"), (alice, "base"), (mallory, "base")):
        seen = run_step(f"cat {view}/obj.o 2>&1; ls -A {view}", t, 30, isolation=who, arm=arm, step="build")
        assert "poisoned" not in seen.output, (who.namespace, arm)
    # The benchmark sees its arm's cache read-only; the operator's own view path stays untouched.
    bench = run_step(f"cat {view}/obj.o; echo x > {view}/more && echo WROTE", t, 30, isolation=mallory,
                     arm="candidate", step="benchmark")
    assert "poisoned" in bench.output and "WROTE" not in bench.output
    assert not Path(view, "obj.o").exists()


@needs_bwrap
def test_a_cache_declared_as_the_cache_root_no_longer_reaches_the_clones_hooks(tmp_path, cache_root):
    """N1 end to end: the build declares the cache root (in which the run's clone lies) to write a
    git hook into its own clone; the run is refused before any target code runs."""
    from jobs import api
    from jobs.contract.errors import RunError
    layout = api.RunLayout(cache_root / "bot", "octo", "synth", "n1")
    t = synthetic_target(layout.clone)
    hook = layout.clone / ".git" / "hooks" / "post-checkout"
    (t / "build.sh").write_text(f"printf '#!/bin/sh\\ntouch {tmp_path}/pwned\\n' > {hook}; chmod +x {hook}\n"
                                + (t / "build.sh").read_text())
    cfg = t / ".github" / "autoresearch.yml"
    cfg.write_text(cfg.read_text() + f"sandbox: {{caches: ['{cache_root}']}}\n")
    git(t, "add", "-A")
    git(t, "commit", "-qm", "declare the cache root")
    with pytest.raises(RunError, match="cache root itself"):
        api.start(api.prepare_candidates(layout, git(t, "rev-parse", "HEAD"), [], "local"), executor="local",
                  agent="none")
    cfg.write_text(cfg.read_text().replace(f"['{cache_root}']", f"['{cache_root / 'bot'}']"))
    git(t, "commit", "-qam", "declare the workdir")
    with pytest.raises(RunError, match="contains or lies in"):
        api.start(api.prepare_candidates(layout, git(t, "rev-parse", "HEAD"), [], "local"), executor="local",
                  agent="none")
    assert not hook.exists() and not (tmp_path / "pwned").exists()



# -- the operator's secret files (the App's key) are never a declared path, wherever they live -----
def test_a_declared_path_that_is_contains_or_lies_in_an_operator_secret_is_refused():
    """Pure: the rule alone, on resolved paths. The key kept under the cache root (which the
    default layouts never do, but an operator may) is refused as the file, its folder, any folder
    above it, and a secret folder (~/.aws) as anything inside it; siblings stay allowed."""
    from jobs.guard.declared_paths import refusal, relation
    where = dict(root="/c", namespaces="/c/repos", protected=["/c/bot"],
                 secrets=["/c/keys/app.pem", "/c/aws", "/c/bot/app.pem"])
    for field, raw, how, secret in [("read_only", "/c/keys/app.pem", "is", "/c/keys/app.pem"),
                                    ("read_only", "/c/keys", "contains", "/c/keys/app.pem"),
                                    ("caches", "/c/aws/sso", "lies in", "/c/aws"),
                                    ("read_only", "/c/bot", "contains", "/c/bot/app.pem")]:   # named as the key
        why = refusal(field, raw, raw, **where)
        assert why.startswith(f"sandbox.{field}: {raw} {how} {secret}, a secret file of the operator's"), why
        assert "cache root" in why                               # and what to do instead
    assert "that is /c/keys" in refusal("read_only", "/c/link", "/c/keys", **where)   # a link, judged by its target
    for fine in ("/c/keys2", "/c/keys.pem", "/c/models", "/c/aws-models"):           # prefixes are not folders
        assert refusal("read_only", fine, fine, **where) == "", fine
    assert relation("/c/keys", "/c/keys/app.pem") == "contains" and relation("/c/k", "/c/keys") == ""
    assert relation("/c", "/") == "lies in" and relation("/", "/c") == "contains"


def test_the_apps_settings_name_its_secret_files_to_every_run(tmp_path, monkeypatch):
    from bot.settings import Settings
    from jobs.run.pipeline import Run, RunOptions
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    key = tmp_path / "cache" / "keys" / "app.pem"
    s = Settings.from_env({"AUTORESEARCH_APP_ID": "1", "AUTORESEARCH_PRIVATE_KEY_PATH": str(key),
                           "AUTORESEARCH_WEBHOOK_SECRET": "s", "AUTORESEARCH_WORKDIR": str(tmp_path / "work")})
    try:
        aws = str(tmp_path / "home" / ".aws")
        assert s.operator.secrets == (str(key), aws)
        assert Settings.for_action({}).operator.secrets == (aws,)
        t = synthetic_target(tmp_path / "t")
        spec = Run(RunOptions(target=t, out=tmp_path / "out", run_id="k", agent="none", operator=s.operator))._sandbox_spec()
        assert spec.secrets == [str(key), aws]
    finally:
        sandbox._HIDDEN.discard(os.path.realpath(key))          # Settings masks it process-wide


@needs_bwrap
def test_an_app_key_kept_under_the_cache_root_is_refused_and_never_read_by_target_code(tmp_path, cache_root):
    """The audit's residual gap, with real bwrap: the key at <cache root>/keys/app.pem, a repository
    declaring it (or its folder) `read_only`. Refused both ways the key is known (the operator's
    policy, a run through `jobs.api`; the process's masks, a bare `Isolation`), and target code with
    an allowed declaration beside it still cannot find it. The canary is in no output."""
    from jobs import api
    from jobs.contract.errors import RunError
    canary = f"-----BEGIN PRIVATE KEY----- keygap-canary-{os.getpid()}"
    keys = cache_root / "keys"
    keys.mkdir()
    key = keys / "app.pem"
    key.write_text(canary + "\n")
    (cache_root / "models").mkdir()
    layout = api.RunLayout(cache_root / "bot", "octo", "synth", "keygap")
    t = synthetic_target(layout.clone)
    (t / "build.sh").write_text(f"cat {key}; cat {key} > {cache_root}/models/stolen\n" + (t / "build.sh").read_text())
    cfg = t / ".github" / "autoresearch.yml"
    base_cfg = cfg.read_text()
    operator = OperatorPolicy(face="app", secrets=(str(key),))      # what bot.settings hands every run
    said = []
    for declared in (key, keys):
        cfg.write_text(base_cfg + f"sandbox: {{read_only: ['{declared}']}}\n")
        git(t, "commit", "-qam", f"declare {declared.name} read-only")
        with pytest.raises(RunError) as err:
            api.start(api.prepare_candidates(layout, git(t, "rev-parse", "HEAD"), [], "local"), executor="local",
                      agent="none", operator=operator)
        said.append(str(err.value))
        assert f"sandbox.read_only: {declared} " in said[-1] and f"{key}, a secret file" in said[-1], said[-1]
    assert not (cache_root / "models" / "stolen").exists()             # no build ran
    # The same declarations through a bare Isolation, the key known only as a masked path.
    sandbox.hide(key)
    try:
        for declared in (key, keys):
            with pytest.raises(IsolationError, match=f"sandbox.read_only: {declared} .*secret file") as err:
                Isolation.from_spec(SandboxSpec(read_only=[str(declared)], repo_key=repo_key("mallory/evil")))
            said.append(str(err.value))
        allowed = Isolation.from_spec(SandboxSpec(read_only=[str(cache_root / "models")],
                                                  repo_key=repo_key("mallory/evil")))
        looked = run_step(f"cat {key} {keys}/* 2>&1; ls -laR {cache_root} 2>&1", tree(tmp_path), 60, isolation=allowed)
        said.append(looked.output)
    finally:
        sandbox._HIDDEN.discard(os.path.realpath(key))
    assert "No such file" in looked.output
    for text in said:
        assert canary not in text and "keygap-canary" not in text, text
    for path in (cache_root / "bot").rglob("*"):
        if path.is_file():
            assert b"keygap-canary" not in path.read_bytes(), path

@needs_bwrap
def test_the_init_cannot_be_replaced(tmp_path, cache_root):
    """N2: a build writes a fake init everywhere it can (the sandbox's own /.autoresearch-init, the
    old place under the cache root through a declared cache); the next sandbox runs ours."""
    fake = "#!/bin/sh\ntouch /tmp/FAKE-INIT-RAN; exec \"$@\"\n"
    old_place = cache_root / "sandbox"
    iso = Isolation.from_spec(SandboxSpec(caches=[str(old_place)], repo_key=repo_key("mallory/evil")))
    t = tree(tmp_path)
    attack = run_step(f"printf '{fake}' > {sandbox.INIT_PATH} 2>&1 || echo ROOT-INIT-DENIED; "
                      f"for f in {old_place}/init-x {old_place}/init; do printf '{fake}' > $f && chmod +x $f; done",
                      t, 30, isolation=iso)
    assert "ROOT-INIT-DENIED" in attack.output
    expected = sandboxinit.init_sha256()
    after = run_step(f"sha256sum {sandbox.INIT_PATH}; tr '\\0' ' ' < /proc/1/cmdline 2>/dev/null; echo; "
                     "ls /tmp", t, 30, isolation=iso)
    assert after.output.split()[0] == expected and "FAKE-INIT-RAN" not in after.output
    # Its bytes live in a sealed memfd: not even this process can write them.
    fd = sandboxinit._built["fd"]
    with pytest.raises(PermissionError):
        with open(f"/proc/self/fd/{fd}", "r+b") as fh:
            fh.write(b"x")
    # And should they differ all the same (here: swapped for a replacement), the next use rebuilds.
    replacement = sandboxinit._sealed(b"#!/bin/sh\necho REPLACEMENT-RAN\n")
    sandboxinit._built["fd"] = replacement
    done = run_step("echo ours", t, 30, isolation=iso)
    assert done.output.strip() == "ours" and "REPLACEMENT" not in done.output
    assert sandboxinit._digest(sandboxinit._built["fd"]) == sandboxinit._built["sha256"]   # rebuilt: ours again


# -- N13: root's files are not the sandbox's ------------------------------------------------------
@needs_bwrap
def test_a_root_worker_runs_target_code_as_an_unprivileged_user(tmp_path):
    t = tree(tmp_path)
    (t / "src.txt").write_text("from git\n")
    done = run_step("id -u; head -c 64 /etc/shadow; echo; grep -i '^Cap\\(Prm\\|Eff\\)' /proc/self/status; "
                    "echo built > out.txt; cat src.txt; echo x > .git 2>/dev/null || true", t, 30)
    assert done.returncode == 0, done.output
    assert "root:" not in done.output                       # /etc/shadow not readable
    assert "CapPrm:\t0000000000000000" in done.output and "CapEff:\t0000000000000000" in done.output
    assert (t / "out.txt").read_text() == "built\n" and "from git" in done.output   # the tree is still its own
    if ROOT_WORKER:
        assert done.output.split()[0] == str(Limits().sandbox_uid)


@needs_bwrap
def test_the_worktrees_git_file_is_not_the_steps_to_replace(tmp_path):
    if not ROOT_WORKER:
        pytest.skip("only a root worker's steps run as another uid")
    repo = synthetic_target(tmp_path / "t")
    before = (repo / ".git").is_dir()
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "--detach", str(wt))
    gitfile = (wt / ".git").read_text()
    done = run_step("rm -f .git; echo 'gitdir: /tmp/evil' > .git; echo built > out.txt", wt, 30)
    assert before and (wt / ".git").read_text() == gitfile, done.output
    assert (wt / "out.txt").read_text() == "built\n"
    assert git(wt, "status", "--porcelain") == "?? out.txt"      # git still trusts the tree, as root


# -- N9, N10: limits --------------------------------------------------------------------------------
@needs_bwrap
def test_limits_bound_memory_files_tmpfs_and_cores(tmp_path):
    small = Isolation(limits=Limits(memory_mib=256, file_mib=8, tmpfs_mib=2))
    t = tree(tmp_path)
    done = run_step("python3 -c 'bytearray(512 * 1024 * 1024)' 2>&1 | tail -1; "
                    "(dd if=/dev/zero of=big bs=1M count=12 2>/dev/null); echo dd=$?; "
                    "for d in /tmp /dev/shm ~; do dd if=/dev/zero of=$d/fill bs=1M count=4 2>&1 | grep -o 'No space left'; done; "
                    "df -m /tmp /dev/shm ~ | tail -3; ulimit -c", t, 60, isolation=small)
    out = done.output
    assert "MemoryError" in out, out
    assert "dd=0" not in out, out
    assert out.count("No space left") == 3, out
    assert (t / "big").stat().st_size <= 8 * 1024 * 1024
    assert out.strip().splitlines()[-1] == "0"


@needs_bwrap
def test_a_fork_bomb_is_bounded(tmp_path):
    if not ROOT_WORKER:
        pytest.skip("RLIMIT_NPROC counts every process of the worker's own uid; as root, only the sandbox's")
    t = tree(tmp_path)
    bomb = ("import os, time\nok = 0\nfor i in range(300):\n    try:\n        pid = os.fork()\n"
            "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n"
            "    ok += 1\nprint('started=%d' % ok)\n")
    (t / "bomb.py").write_text(bomb)
    done = run_step("python3 bomb.py", t, 60, isolation=Isolation(limits=Limits(processes=64)))
    started = int(done.output.split("started=")[1].split()[0])
    assert started < 64, done.output


@needs_bwrap
@pytest.mark.parametrize("sandboxed", [True, False])
def test_output_is_read_up_to_the_cap_and_the_step_fails_saying_so(tmp_path, sandboxed):
    """N9: 512 MiB of benchmark output in a child process: the step stops at the cap (4 MiB) and the
    reader's memory stays bounded (measured as the child's peak RSS, never a duration)."""
    code = (f"import resource, sys; sys.path.insert(0, {str(ROOT)!r})\n"
            "from pathlib import Path\nfrom jobs.guard.limits import Limits\nfrom jobs.measure.isolation import Isolation\nfrom jobs.measure.runner import run_step\n"
            f"s = run_step('yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx | head -c 536870912', Path({str(tree(tmp_path))!r}), 120,"
            f" isolation=Isolation(enabled={sandboxed}, limits=Limits(output_mib=4)), step='benchmark')\n"
            # VmHWM: the peak RSS of this process's own memory since its exec. (ru_maxrss would not do:
            # Linux keeps it across exec, so it starts at the parent's size when pytest has grown.)
            "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')).split()[1]\n"
            "print(len(s.output), repr(s.overflow), int(hwm) // 1024)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    size, rest = proc.stdout.split(" ", 1)
    reason, peak_mib = rest.rsplit(" ", 1)
    assert int(size) == 4 * 1024 * 1024 and "cap of 4 MiB" in reason, proc.stdout + proc.stderr
    assert int(peak_mib) < 300, f"the runner grew to {peak_mib} MiB reading capped output"


@needs_bwrap
def test_a_benchmark_past_the_caps_fails_with_the_reason(tmp_path, cache_root):
    from jobs.contract.config import load_config
    from jobs.measure.runner import run_experiment
    from jobs.contract.spec import ExperimentSpec
    repo = synthetic_target(tmp_path / "t")
    spec = ExperimentSpec.from_config(load_config(repo), run_id="r", name="e", platform="local",
                                      base_commit=git(repo, "rev-parse", "HEAD"), head_commit=git(repo, "rev-parse", "HEAD"),
                                      n_per_arm=3)
    spec.benchmark = "yes 'METRIC score=1' | head -n 30000"
    spec.sandbox.limits = Limits(metric_lines=1000).to_dict()
    result = run_experiment(spec, repo, repo)
    assert result.status == "crash" and "more than 1000 METRIC/DIGEST lines" in result.reason, result.reason
    spec.benchmark = "head -c 50000000 /dev/zero"
    spec.sandbox.limits = Limits(output_mib=2).to_dict()
    result = run_experiment(spec, repo, repo, build_base=False)
    assert result.status == "crash" and "cap of 2 MiB" in result.reason, result.reason


# -- N7 (half): files the worker reads from a tree are bounded --------------------------------------
def test_files_from_a_tree_are_read_with_a_cap(tmp_path):
    from jobs.guard.safefs import UnsafeFile, read_bytes
    ok = tmp_path / "ok.txt"
    ok.write_bytes(b"x" * 100)
    assert read_bytes(tmp_path, "ok.txt", 100) == b"x" * 100
    with pytest.raises(UnsafeFile, match="more than the 99"):
        read_bytes(tmp_path, "ok.txt", 99)
    with pytest.raises(UnsafeFile, match="not a regular file"):
        read_bytes("/dev", "zero", 1 << 20)
    (tmp_path / "link").symlink_to(ok)
    with pytest.raises(UnsafeFile, match="symbolic link"):
        read_bytes(tmp_path, "link", 1 << 20)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsafeFile, match="not a regular file"):
        read_bytes(tmp_path, "fifo", 1 << 20)


def test_rlimits_never_raise_a_hard_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_CORE), resource.getrlimit(resource.RLIMIT_FSIZE))"
    out = subprocess.run(Limits(file_mib=3).wrap([sys.executable, "-c", code]), capture_output=True, text=True).stdout
    assert out.strip() == f"(0, 0) ({3 * 1024 * 1024}, {3 * 1024 * 1024})"
    assert resource.getrlimit(resource.RLIMIT_NPROC) == (soft, hard)   # only the child was lowered


def test_only_builds_of_the_base_commit_write_the_baselines_caches(tmp_path):
    from jobs.contract.config import load_config
    from jobs.measure.runner import base_arm
    from jobs.contract.spec import ExperimentSpec
    repo = synthetic_target(tmp_path / "t")
    head = git(repo, "rev-parse", "HEAD")
    for kind, arm in (("experiment", "base"), ("calibration", "base"), ("stack", "base"), ("attribution", "candidate")):
        spec = ExperimentSpec.from_config(load_config(repo), run_id="r", name="e", platform="local", base_commit=head,
                                          head_commit=head, n_per_arm=3, kind=kind)
        assert base_arm(spec) == arm, kind


def test_a_config_that_is_a_symlink_or_huge_is_refused_unread(tmp_path):
    from jobs.contract.config import CONFIG_PATH, ConfigError, load_config
    secret = tmp_path / "app.pem"
    secret.write_text("-----BEGIN PRIVATE KEY-----\nkey-bytes-canary\n")
    repo = synthetic_target(tmp_path / "t")
    cfg = repo / CONFIG_PATH
    for target in (secret, Path("/dev/zero")):
        cfg.unlink()
        cfg.symlink_to(target)
        with pytest.raises(ConfigError) as err:
            load_config(repo)
        assert "key-bytes-canary" not in str(err.value)
    cfg.unlink()
    cfg.write_text("name: x\n" + "#" * (2 << 20))
    with pytest.raises(ConfigError):
        load_config(repo)
