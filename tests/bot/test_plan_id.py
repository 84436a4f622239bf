"""N5: the plan id (`bot.planning.plan_id`) changes with every field of the plan, its repository,
issue and nonce, and only with them: an approval names exactly the plan its approver saw."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bot import approval as ap
from bot import planning
from jobs import api
from jobs.contract.config import Overrides, parse_config
from jobs.contract.model import Hypothesis
from jobs.research.offline import Research
from synthetic import CONFIG

BASE = "a" * 40


def prep(tmp_path: Path, *, config: str = CONFIG, base: str = BASE, patch: str = "--- a\n+++ b\n",
         hypotheses: tuple[str, ...] = ("fuse-x",), run_id: str = "2-aaaaaaa", usd: float | None = None) -> api.Preparation:
    layout = api.RunLayout(tmp_path, "octo", "synth", run_id)
    layout.candidates.mkdir(parents=True, exist_ok=True)
    cand = layout.candidates / "faster.patch"
    cand.write_text(patch)
    cfg = parse_config(config)
    found = Research([Hypothesis(id=h, title=h, kind="fusion", rationale="r") for h in hypotheses], [], [], {}, [])
    plan = api.make_plan(cfg, len(hypotheses) + 1, "local")
    if usd is not None:
        plan = dataclasses.replace(plan, est_usd=usd)
    return api.Preparation(layout, base, cfg, found, [cand], plan)


def test_every_field_changes_the_id(tmp_path):
    nonce = "n" * 32
    same = planning.plan_id(prep(tmp_path / "a"), "octo/synth", 2, Overrides(), nonce)
    assert same == planning.plan_id(prep(tmp_path / "b"), "octo/synth", 2, Overrides(), nonce)    # deterministic
    variants = {
        "repository": planning.plan_id(prep(tmp_path / "c"), "other/synth", 2, Overrides(), nonce),
        "issue": planning.plan_id(prep(tmp_path / "d"), "octo/synth", 3, Overrides(), nonce),
        "nonce": planning.plan_id(prep(tmp_path / "e"), "octo/synth", 2, Overrides(), "m" * 32),
        "metric": planning.plan_id(prep(tmp_path / "f"), "octo/synth", 2, Overrides(metric="ms"), nonce),
        "budget": planning.plan_id(prep(tmp_path / "g"), "octo/synth", 2, Overrides(budget=5.0), nonce),
        "base commit": planning.plan_id(prep(tmp_path / "h", base="b" * 40), "octo/synth", 2, Overrides(), nonce),
        "config": planning.plan_id(prep(tmp_path / "i", config=CONFIG.replace("build: 20", "build: 21")),
                                   "octo/synth", 2, Overrides(), nonce),
        "candidate content": planning.plan_id(prep(tmp_path / "j", patch="--- a\n+++ c\n"), "octo/synth", 2,
                                              Overrides(), nonce),
        "hypotheses": planning.plan_id(prep(tmp_path / "k", hypotheses=("fuse-y",)), "octo/synth", 2,
                                       Overrides(), nonce),
        "estimate": planning.plan_id(prep(tmp_path / "l", usd=9.0), "octo/synth", 2, Overrides(), nonce),
        "run id": planning.plan_id(prep(tmp_path / "m", run_id="2-aaaaaaa-1234"), "octo/synth", 2, Overrides(), nonce),
    }
    assert all(len(v) == 16 and int(v, 16) >= 0 for v in variants.values())
    assert same not in variants.values(), [k for k, v in variants.items() if v == same]
    assert len(set(variants.values())) == len(variants)


def test_an_id_needs_its_nonce():
    with pytest.raises(ValueError, match="nonce"):
        ap.plan_id({"plan": 1}, "")
    assert planning.new_nonce() != planning.new_nonce()
