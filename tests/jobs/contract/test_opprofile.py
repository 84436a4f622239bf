"""Issue 42: the op profile is typed (`OpProfile`, `WorkloadTime`) in state.json and summary.json; the
object research's `Profile.to_dict()` writes, and an older or newer one, loads typed and is written
back as it was read; pr.md's section renders from the typed value."""
from __future__ import annotations

from jobs.contract import ledger
from jobs.contract.opprofile import OpProfile, WorkloadTime, op_profile
from jobs.contract.runstate import RunState
from jobs.contract.runsummary import RunSummary
from jobs.report.report import profile_section

PROFILE = {"command": "bash bench.sh", "cpu": "Test CPU", "notes": ["warm-up left out"], "workloads": [
    {"name": "pp4", "tokens": 4, "graphs": 1, "skipped": 1, "total_ms": 2.5, "threads": 2,
     "by_op": {"MUL_MAT": 0.711, "ADD": 0.2}, "fused_per_graph": {"MUL_MAT+ADD": 1.0}},
    {"tokens": 2, "name": "tg2", "graphs": 2, "total_ms": 1.0, "threads": 2, "by_op": {}, "gpu": "none"}],
    "from_a_newer_version": 1}


def test_a_stored_profile_loads_typed_and_is_written_back_as_read(tmp_path):
    ledger.save_state(tmp_path, {"run_id": "r1", "profile": PROFILE})
    before = (tmp_path / "state.json").read_bytes()
    state = RunState.load(tmp_path)
    assert isinstance(state.profile, OpProfile) and state.profile.cpu == "Test CPU"
    pp4, tg2 = state.profile.workloads
    assert isinstance(pp4, WorkloadTime) and pp4.by_op == {"MUL_MAT": 0.711, "ADD": 0.2} and pp4.skipped == 1
    assert tg2.skipped == 0 and tg2.fused_per_graph == {} and tg2.extra == {"gpu": "none"}
    assert state.profile.extra == {"from_a_newer_version": 1}
    state.save()
    assert (tmp_path / "state.json").read_bytes() == before
    state.save(profile=None)                       # a run whose profile was not measured
    assert RunState.load(tmp_path).profile is None


def test_the_summary_carries_it_typed_and_pr_md_renders_it():
    profile = op_profile(PROFILE)
    assert op_profile(profile) is profile and op_profile(None) is None
    summary = RunSummary(run_id="r", target="t", repo="", base_commit="b" * 40, branch="", platform="local",
                         platforms=["local"], cpus={}, cpu="", machines={}, agent="offline", primary="m",
                         calibration={}, experiments=[], profile=PROFILE)
    assert summary.profile == profile and summary.to_json()["profile"] == PROFILE
    assert RunSummary.from_json(summary.to_json()).profile == profile
    lines = profile_section(summary.profile)
    assert lines[0].startswith("## Where the time goes")
    assert "- **pp4** (1 graph of 4 tokens, 2.5 ms, 2 threads): MUL_MAT 71.1%, ADD 20.0%" in lines
    assert profile_section(OpProfile()) == [] and profile_section(None) == []
