"""Issue 43, part 1: when simulated cycles keep a change while the wall clock leans the other way,
pr.md's summary (the part a reviewer reads first) says so in plain words, not only a table."""
from __future__ import annotations

from jobs.report.report import render_pr
from summaries import run_summary
from test_report import metric


def sim_stack(wall_delta: float, loss_p: float, *, cpu_head: float = 0.75, confirmed: bool = False) -> dict:
    return dict(name="stack", platform="x86", status="keep", reason="simulated cycles -2.00%", commit="b" * 40,
                cpu="Xeon",
                metrics=[metric("tg_tps", wall_delta, 0.5, "no detectable difference")],
                runner={"pairs": 20, "stopped": "simulated", "wall_base_s": 0.7, "wall_head_s": 0.72,
                        "cpu_base_s": 0.70, "cpu_head_s": cpu_head,
                        "simulated": {"base_cycles": 1_000_000, "head_cycles": 980_000, "delta_pct": -2.0,
                                      "floor_pct": 0.5},
                        "wall_guard": {"lo_pct": -9.1, "hi_pct": 1.2, "alpha": 0.05, "tolerance_pct": 5.0,
                                       "pairs": 20, "loss_p": loss_p, "confirmed": confirmed}})


def pr(stack: dict) -> str:
    kept = dict(name="fuse", hypothesis="fuse", platform="x86", status="keep", reason="simulated cycles -2.00%",
                metrics=stack["metrics"], runner=stack["runner"])
    return render_pr(run_summary(platform="x86", platforms=["x86"], primary="tg_tps", experiments=[kept],
                                 stack_applied=["fuse"], stacks={"x86": stack}, simulate={"x86": {"base_cycles": 1}},
                                 stack_confirmed=True))


def summary_section(md: str) -> str:
    return md.split("## Summary")[1].split("\n## ")[0]


def test_a_keep_on_simulated_cycles_whose_wall_clock_leans_the_other_way_is_said_in_the_summary():
    md = pr(sim_stack(-4.7, loss_p=0.09))
    top = summary_section(md)
    sentence = ("**Kept on simulated cycles (-2.0%); the wall clock leaned the other way** (the stack on x86: "
                "tg_tps -4.7%, interval -9.1%…+1.2% (0.05, 20 pairs), and the runner's CPU clock +7.1% per process), "
                "within the 5% tolerance — review on your hardware before merging.")
    assert sentence in top, top
    assert md.count("leaned the other way") == 1           # the stack's, not the experiment's again


def test_a_keep_whose_wall_clock_agrees_says_nothing_of_the_kind():
    for agreeing in (sim_stack(+3.1, loss_p=0.93, cpu_head=0.66, confirmed=True), sim_stack(+0.2, loss_p=0.5)):
        assert "leaned the other way" not in pr(agreeing)


def test_an_experiment_kept_alone_leaning_the_other_way_is_said_when_no_stack_was_kept():
    stack = sim_stack(-4.7, loss_p=0.2)
    lost = {**stack, "status": "discard", "reason": "not confirmed"}
    kept = dict(name="fuse", hypothesis="fuse", platform="x86", status="keep", reason="simulated cycles -2.00%",
                metrics=stack["metrics"], runner=stack["runner"])
    md = render_pr(run_summary(platform="x86", platforms=["x86"], primary="tg_tps", experiments=[kept],
                               stack_applied=["fuse"], stacks={"x86": lost}, simulate={"x86": {"base_cycles": 1}}))
    top = summary_section(md)
    assert "**Kept on simulated cycles (-2.0%); the wall clock leaned the other way** (fuse on x86: tg_tps -4.7%" in top


def test_a_lean_the_size_of_the_noise_is_not_said():
    """A keep whose wall clock moved -0.4% (interval -3.0%…+1.5%, confirming it) is not 'leaning the
    other way': the sentence needs a 1% move toward a loss or an interval that does not exclude one."""
    small = sim_stack(-0.4, 0.4)
    small["runner"]["wall_guard"].update(lo_pct=-3.0, hi_pct=1.5, confirmed=True)
    assert "leaned the other way" not in pr(small)
    unconfirmed = sim_stack(-0.4, 0.4)
    unconfirmed["runner"]["wall_guard"].update(lo_pct=-6.0, hi_pct=1.5)
    assert "leaned the other way" in pr(unconfirmed)
    assert "leaned the other way" in pr(sim_stack(-4.7, 0.4))
