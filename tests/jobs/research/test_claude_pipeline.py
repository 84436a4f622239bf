"""The Claude path end to end: research -> calibrate -> experiments (tool-use loop) -> revise ->
stack -> report, with the model replaced by a fake Messages API on loopback."""
from __future__ import annotations

import json
import re

import pytest

from fake_anthropic import FakeMessagesAPI, result_text, text, tool_results, tool_use
from jobs.agent import claude
from jobs.contract.config import load_config
from jobs.run.pipeline import Run, RunOptions
from synthetic import FASTER, synthetic_target

pytestmark = pytest.mark.measures   # see tests/conftest.py: one worker runs every measuring test


def hyp(id_, title):
    return {"id": id_, "title": title, "kind": "micro", "rationale": "the benchmark reads src/speed.txt",
            "expected": "higher score", "score": 5, "evidence": [{"where": "src/speed.txt:1", "note": "speed"}]}


def test_claude_agent_runs_a_full_local_experiment(tmp_path):
    target = synthetic_target(tmp_path / "target")

    def research_turn(request):
        prompt = request["messages"][0]["content"]
        assert "<<< untrusted data from offline ranking" in prompt
        return tool_use("submit_hypotheses", {"hypotheses": [hyp("raise-speed", "Raise the speed constant"),
                                                             hyp("tidy-code", "Tidy code.c")]})

    def after(expect, then):
        def step(request):
            assert expect in result_text(tool_results(request)[-1])
            return then
        return step

    def revise_turn(request):
        prompt = request["messages"][0]["content"]
        # On failure, say what the run judged (status and reason), not just that the prompt differs.
        judged = re.findall(r'"(?:hypothesis|status|reason)": "([^"]*)"', prompt)
        assert '"hypothesis": "raise-speed"' in prompt and '"status": "keep"' in prompt, judged
        return tool_use("submit_revision", {"order": ["tidy-code"], "note": "keep going"})

    script = [
        research_turn,
        tool_use("read_file", {"path": "src/speed.txt"}),
        after("1: 100", tool_use("apply_edit", {"path": "src/speed.txt", "old": "100\n", "new": FASTER})),
        after("edited", tool_use("build", {})),
        after("build exit 0", tool_use("quick_check", {})),
        after("checks exit 0", text("Speed constant raised; builds and passes checks.")),
        revise_turn,
        text("Nothing in code.c affects the benchmark; no edit made."),
    ]
    with FakeMessagesAPI(script) as fake:
        agent = claude.make({}, load_config(target), client=fake.client())
        out = tmp_path / "out"
        summary = Run(RunOptions(target=target, out=out, run_id="c1", agent="claude"), agent=agent).execute()
    assert not fake.errors and not fake.script, (fake.errors, fake.script)
    by = {e.hypothesis: e for e in summary.experiments}
    assert by["raise-speed"].status == "keep", by["raise-speed"].reason
    assert by["tidy-code"].status == "skipped" and "no edit" in by["tidy-code"].reason
    assert summary.stack_applied == ["raise-speed"]
    assert summary.agent == "claude"
    research = (out / "research.md").read_text()
    assert "ranked by claude from the source digests" in research
    assert [h["id"] for h in json.loads((out / "hypotheses.json").read_text())] == ["raise-speed", "tidy-code"]
    state = json.loads((out / "state.json").read_text())
    # Every model call (research, both implementations, revise) is charged to the run's cost.
    assert agent.meter.calls == 8 and state["llm"]["calls"] == 8
    assert agent.meter.usd > 0 and state["llm"]["cost_usd"] == pytest.approx(agent.meter.usd, abs=1e-6)
    assert summary.cost_usd == pytest.approx(agent.meter.usd, abs=1e-6)   # local machines cost nothing


def test_cli_research_with_claude_needs_a_key_and_uses_the_sdk_settings(tmp_path, monkeypatch, capsys):
    from jobs.cli import main
    target = synthetic_target(tmp_path / "target")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["research", str(target), "--agent", "claude", "--out", str(tmp_path / "nokey")]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().out
    script = [tool_use("submit_hypotheses", {"hypotheses": [hyp("raise-speed", "Raise the speed constant")]})]
    with FakeMessagesAPI(script) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-cli-key-123456")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        out = tmp_path / "out"
        assert main(["research", str(target), "--agent", "claude", "--out", str(out)]) == 0
    sent = fake.headers[0]
    assert "sk-ant-cli-key-123456" in (sent.get("x-api-key", "") + sent.get("authorization", ""))
    assert "sk-ant-cli-key-123456" not in fake.raw[0]
    assert [h["id"] for h in json.loads((out / "hypotheses.json").read_text())] == ["raise-speed"]
