"""jobs/calcache.py: a calibration is reused only for the same measurement. The variables the config
passes to target code are part of it: a llama.cpp cell at `-t 2` on another model reused a `-t 1`
run's calibration (same commit, config and machine) until their values joined the key."""
from __future__ import annotations

from types import SimpleNamespace

from jobs import calcache
from jobs.calibrating import Calibrating
from jobs.config import parse_config

CONFIG = parse_config("""
build: make
benchmark: ./bench
checks: ./checks
metrics: [{name: speed, direction: higher, primary: true}]
editable: ["src/**"]
sandbox: {env: [MODEL, THREADS]}
""")


def test_the_passed_variables_values_are_part_of_the_key():
    same = calcache.key(CONFIG, "abc", "local", "cpu", 8, {"MODEL": "/m/qwen3.gguf", "THREADS": "1"})
    assert same == calcache.key(CONFIG, "abc", "local", "cpu", 8, {"THREADS": "1", "MODEL": "/m/qwen3.gguf"})
    assert same != calcache.key(CONFIG, "abc", "local", "cpu", 8, {"MODEL": "/m/qwen3.gguf", "THREADS": "2"})
    assert same != calcache.key(CONFIG, "abc", "local", "cpu", 8, {"MODEL": "/m/tinyllama.gguf", "THREADS": "1"})
    assert same != calcache.key(CONFIG, "abc", "local", "cpu", 8, {"MODEL": "/m/qwen3.gguf"})


def test_passed_env_is_what_target_code_sees_of_the_declared_names():
    source = {"MODEL": "/m/a.gguf", "THREADS": "2", "UNDECLARED": "x", "GITHUB_TOKEN": "ghs_secret"}
    assert calcache.passed_env(["MODEL", "THREADS"], source) == {"MODEL": "/m/a.gguf", "THREADS": "2"}
    assert calcache.passed_env(["MODEL", "GITHUB_TOKEN"], source) == {"MODEL": "/m/a.gguf"}   # never a secret


def test_a_runs_calibration_key_follows_the_environment_its_benchmark_gets(monkeypatch, tmp_path):
    bench = SimpleNamespace(config=CONFIG, state={"base_commit": "abc"}, repeats=None,
                            sandbox=SimpleNamespace(env=["MODEL", "THREADS"]))
    cal = Calibrating(tmp_path, bench)
    monkeypatch.setenv("MODEL", "/m/qwen3.gguf")
    monkeypatch.setenv("THREADS", "1")
    t1 = cal._key("local", "cpu")
    monkeypatch.setenv("THREADS", "2")
    assert cal._key("local", "cpu") != t1
    monkeypatch.setenv("THREADS", "1")
    assert cal._key("local", "cpu") == t1
