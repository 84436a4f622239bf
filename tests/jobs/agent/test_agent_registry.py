"""One registry of agents (jobs/contract/agentkinds.py): everything that names an agent reads it, so a new
agent is one entry plus its module; the SDK stays behind its adapter."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from jobs.contract import agentkinds, configdoc
from jobs import cli
from jobs.agent import make_agent
from jobs.agent.llm import LLMAgent
from jobs.contract.config import ConfigError, parse_config
from synthetic import synthetic_target
from test_layering import imports, modules

GOOD = "build: make\nbenchmark: ./b\nchecks: ./c\nmetrics: [{name: t, primary: true}]\neditable: [src/**]\n"


def test_only_the_anthropic_adapter_imports_the_sdk():
    assert [m for m in sorted(modules()) if "anthropic" in imports(m)[1]] == ["jobs.agent.claude"]
    neutral = ["jobs.agent.llm", "jobs.agent.chat", "jobs.agent.tools", "jobs.agent.prompts", "jobs.agent.meter"]
    assert [m for m in neutral if "jobs.agent.claude" in imports(m)[0]] == []


def test_every_registered_agent_has_a_module_that_makes_it():
    config = parse_config(GOOD)
    for name, kind in agentkinds.AGENTS.items():
        assert (ROOT / "jobs" / "agent" / f"{kind.module}.py").is_file(), name      # on the agents' floor
        agent = make_agent(name, {}, config, client=object())       # a client: no key, no request
        assert callable(agent.implement) and callable(agent.revise)
    assert isinstance(make_agent("claude", {}, config, client=object()), LLMAgent)
    assert make_agent("claude", {}, config, client=object()).name == "claude"


def test_an_unknown_agent_is_refused_by_the_config_the_cli_and_make_agent(capsys):
    with pytest.raises(ConfigError, match="agent") as caught:
        parse_config(GOOD + "agent: gpt\n")
    assert all(f"'{n}'" in str(caught.value) for n in agentkinds.AGENTS)         # the choices are shown
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["run", "t", "--agent", "gpt"])
    assert "invalid choice: 'gpt'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown agent 'gpt' \\(choose offline, claude, none\\)"):
        make_agent("gpt", {}, parse_config(GOOD))


def test_a_config_asking_for_an_agent_whose_key_is_missing_runs_the_default():
    assert agentkinds.for_config("claude", {}) == (
        "offline", "config asks for agent: claude but ANTHROPIC_API_KEY is not set; using offline")
    assert agentkinds.for_config("claude", {"ANTHROPIC_API_KEY": "k"}) == ("claude", "")
    assert agentkinds.for_config("none", {}) == ("none", "")


NEW_AGENT = textwrap.dedent("""
    import sys, types
    from jobs.contract import agentkinds

    # The whole addition: a module under jobs/agent/ (here made in memory) and one registry entry.
    module = types.ModuleType("jobs.agent.echo")
    module.make = lambda recipes, config, **kw: EchoAgent()
    sys.modules["jobs.agent.echo"] = module
    agentkinds.AGENTS["echo"] = agentkinds.AgentKind("echo", "echo", "repeats the hypothesis", needs_env="ECHO_KEY")

    from jobs.agent import Agent      # after the entry: the config's agent names are read at import

    class EchoAgent(Agent):
        name = "echo"
        def implement(self, h, tree, config): return "0" * 40
        def revise(self, pending, results): return pending


    from jobs import cli
    from jobs.contract import configdoc
    from jobs.agent import make_agent
    from jobs.contract.config import parse_config
    config = parse_config({good!r} + "agent: echo\\n")
    parser = cli.build_parser()
    print(config.agent,
          parser.parse_args(["run", "t", "--agent", "echo"]).agent,
          parser.parse_args(["research", "t", "--agent", "echo"]).agent,
          make_agent("echo", {{}}, config).name,
          agentkinds.for_config("echo", {{}})[0],
          [kind for path, kind, _, _ in configdoc.rows() if path == "agent"][0], sep="|")
""")


def test_a_new_agent_is_one_registry_entry_plus_its_module():
    # In a fresh interpreter: the config's field is built from the registry when jobs.contract.config loads.
    proc = subprocess.run([sys.executable, "-c", NEW_AGENT.format(good=GOOD)], check=False, cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().split("|") == ["echo", "echo", "echo", "echo", "offline",
                                              "`offline` or `claude` or `none` or `echo`"]
    # ... and in this interpreter, without it, none of those know the name.
    assert "echo" not in agentkinds.AGENTS and "echo" not in configdoc.markdown_table()


def test_an_agent_that_does_no_research_needs_candidates(tmp_path, capsys):
    target = synthetic_target(tmp_path / "target")
    assert [n for n in agentkinds.AGENTS if not agentkinds.kind(n).researches] == ["none"]
    assert cli.main(["run", str(target), "--agent", "none", "--out", str(tmp_path / "out")]) == 2
    assert "--agent none: evaluates only --candidate patches and none was given" in capsys.readouterr().out
    assert not (tmp_path / "out" / "state.json").exists()


def test_whether_a_run_researches_is_read_from_the_registry_not_the_name():
    assert [n for n in agentkinds.AGENTS if not agentkinds.researches(n)] == ["none"]
    assert agentkinds.researches("an-agent-handed-in-directly")     # outside the registry: it researches


def test_an_agents_abilities_are_declared_fields_and_make_agent_refuses_a_non_agent(monkeypatch):
    """Issue 42: the pipeline read an agent's optional abilities with hasattr; they are declared
    fields of jobs.agent.Agent, off unless an agent turns them on, and make_agent refuses anything
    that is not an Agent."""
    import sys
    import types
    from jobs.agent import Agent, make_agent
    from jobs.agent.offline import OfflineAgent
    from jobs.contract import agentkinds
    offline = OfflineAgent({})
    assert (offline.ranks_from_digests, offline.runs_target_code, offline.reads_profile, offline.meter) == \
        (False, False, False, None)
    from jobs.agent.llm import LLMAgent
    assert LLMAgent.ranks_from_digests and LLMAgent.runs_target_code and LLMAgent.reads_profile
    module = types.ModuleType("jobs.agent.bare")
    module.make = lambda recipes, config, **kw: object()
    monkeypatch.setitem(sys.modules, "jobs.agent.bare", module)
    monkeypatch.setitem(agentkinds.AGENTS, "bare", agentkinds.AgentKind("bare", "bare", "not an Agent"))
    with pytest.raises(TypeError, match="not a jobs.agent.Agent"):
        make_agent("bare", {}, None)
    assert issubclass(OfflineAgent, Agent)

