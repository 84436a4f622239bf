"""The executor registry is the one place a new executor is added: a throwaway executor registered
there (and nowhere else) is accepted by the CLI's --executor, by the App's and the Action's
settings, and built by make_executors; names not registered are refused with the choices."""
from __future__ import annotations

import pytest

from bot.settings import Settings, SettingsError
from jobs.cli import build_parser
from jobs.contract.errors import ExecutorUnavailable
from jobs.executors import make_executors
from jobs.executors.registry import EXECUTORS, ExecutorKind, executor_kind
from jobs.contract.spec import RawResult


class DummyExecutor:
    """Measures nothing: stands in for a new kind of machine (Kubernetes, Ray)."""
    platform = "dummy-platform"
    parallel = 1

    def __init__(self, made_with):
        self.made_with = made_with

    def run(self, spec, progress) -> RawResult:
        return RawResult(status="skipped", reason="dummy")

    def estimate_usd(self, spec) -> float:
        return 0.0

    def build_ahead(self, spec) -> None:
        pass

    def close(self) -> None:
        pass


def make_dummy_executors(repo, workdir, config, run_id):
    return [DummyExecutor((repo, workdir, config, run_id))]


@pytest.fixture()
def dummy(monkeypatch):
    """Registers `dummy` for one test: the only edit a new executor makes outside its own module."""
    kind = ExecutorKind("dummy", "a throwaway executor", lambda: make_dummy_executors)
    monkeypatch.setitem(EXECUTORS, kind.name, kind)
    return kind


def app_env(tmp_path, **extra):
    return {"AUTORESEARCH_APP_ID": "1", "AUTORESEARCH_PRIVATE_KEY_PATH": str(tmp_path / "app.pem"),
            "AUTORESEARCH_WEBHOOK_SECRET": "s", **extra}


def test_a_registered_executor_is_accepted_everywhere_a_name_is_read(dummy, tmp_path, monkeypatch, capsys):
    args = build_parser().parse_args(["run", str(tmp_path), "--executor", "dummy"])
    assert args.executor == "dummy"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    assert "dummy (a throwaway executor)" in " ".join(capsys.readouterr().out.split())
    assert Settings.from_env(app_env(tmp_path, AUTORESEARCH_EXECUTOR="dummy")).executor == "dummy"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Settings.for_action({"AUTORESEARCH_EXECUTOR": "dummy"}).executor == "dummy"
    (executor,) = make_executors("dummy", tmp_path / "repo", tmp_path / "work", None, "r1")
    assert isinstance(executor, DummyExecutor)
    assert executor.made_with == (tmp_path / "repo", tmp_path / "work", None, "r1")


def test_an_unregistered_name_is_refused_with_the_choices(tmp_path, capsys, monkeypatch):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", str(tmp_path), "--executor", "dummy"])
    assert "invalid choice: 'dummy'" in capsys.readouterr().err
    with pytest.raises(SettingsError, match="must be local or skypilot"):
        Settings.from_env(app_env(tmp_path, AUTORESEARCH_EXECUTOR="dummy"))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(SettingsError, match="auto, local or skypilot"):
        Settings.for_action({"AUTORESEARCH_EXECUTOR": "dummy"})
    with pytest.raises(ExecutorUnavailable, match="unknown executor 'dummy' .choose local or skypilot"):
        make_executors("dummy", tmp_path, tmp_path, None, "r1")


def test_the_actions_auto_picks_the_registered_cloud_executor_when_credentials_exist(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    cloud = [k.name for k in EXECUTORS.values() if k.uses_cloud_credentials]
    assert Settings.for_action({"AWS_ACCESS_KEY_ID": "AKIA"}).executor == cloud[0]
    assert Settings.for_action({}).executor == "local"
    # With no executor that uses cloud credentials registered, credentials change nothing.
    for name in cloud:
        monkeypatch.delitem(EXECUTORS, name)
    assert Settings.for_action({"AWS_ACCESS_KEY_ID": "AKIA"}).executor == "local"


def test_a_missing_extra_is_named_when_the_executor_is_chosen(monkeypatch, tmp_path):
    def not_installed():
        raise ImportError("No module named 'kubernetes'")
    monkeypatch.setitem(EXECUTORS, "k8s", ExecutorKind("k8s", "pods", not_installed, extra="kube"))
    with pytest.raises(ExecutorUnavailable, match=r"--executor k8s needs the kube extra .*autoresearch\[kube\]"):
        make_executors("k8s", tmp_path, tmp_path, None, "r1")
    assert executor_kind("k8s").extra == "kube"
    with pytest.raises(ValueError, match="unknown executor 'nope'"):
        executor_kind("nope")


def test_a_plan_prices_instance_types_only_for_an_executor_the_registry_calls_cloud(monkeypatch, tmp_path):
    from jobs.contract.config import parse_config
    from jobs.run.preparation import make_plan
    config = parse_config("build: make\nbenchmark: ./b\nchecks: ./c\nmetrics: [{name: t, primary: true}]\n"
                          "editable: [src/**]\nplatforms: [{name: x86}]\n")
    assert [k.name for k in EXECUTORS.values() if k.is_cloud] == ["skypilot"]
    assert make_plan(config, 1, "local").instance_types == ("",)
    assert make_plan(config, 1, "skypilot").instance_types != ("",)
    monkeypatch.setitem(EXECUTORS, "vm-free", ExecutorKind("vm-free", "a cloud that is not SkyPilot", lambda: None,
                                                          is_cloud=True))
    assert make_plan(config, 1, "vm-free").instance_types == make_plan(config, 1, "skypilot").instance_types
