"""`/autoresearch bench` re-runs: each spends a new keep slot (issue 21), so repeating a bench
until it says "keep" cannot turn a no-change pull request into a win."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from bot.bench import bench_slot, level_note
from jobs.contract.model import ExperimentRecord
from jobs.stats import power as pw
from jobs.stats import sequential as sq
from jobs.run.pipeline import Run

ALPHA, FAMILY = 0.05, 30
ROOT = Path(__file__).resolve().parents[2]


def test_each_bench_of_a_pull_request_takes_the_next_slot_and_a_resumed_one_keeps_its_own(tmp_path):
    assert [bench_slot(tmp_path, 7, f"bench-7-{k}") for k in range(4)] == [1, 2, 3, 4]
    assert bench_slot(tmp_path, 7, "bench-7-1") == 2           # resumed: the same run, the same slot
    assert bench_slot(tmp_path, 8, "bench-8-0") == 1           # another pull request: its own family
    # The run starts its first experiment past the slots earlier benches spent.
    assert Run.next_slot([], spent=3) == 4 and Run.next_slot([]) == 1


CLAIM = """
import json, sys
from pathlib import Path
from bot.bench import bench_slot
root, worker = sys.argv[1], int(sys.argv[2])
print(json.dumps([bench_slot(Path(root), 5, f"bench-5-{worker}-{k}") for k in range(40)]))
"""


def test_benches_started_at_once_by_several_workers_never_share_a_slot(tmp_path):
    # Four processes each start 40 benches of one pull request as fast as they can: without the
    # lock, two read the same ledger, both take its next slot, and one write is lost. Separate
    # interpreters, not a fork of this one: a fork of a test worker whose other threads (servers of
    # earlier tests) held a lock at that moment hung the pool (a CI rehearsal, 600 s timeout).
    procs = [subprocess.Popen([sys.executable, "-c", CLAIM, str(tmp_path), str(w)], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True) for w in range(4)]
    slots = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        slots += json.loads(out)
    assert sorted(slots) == list(range(1, 161))
    assert bench_slot(tmp_path, 5, "bench-5-2-7") in slots       # each one's slot is on record


def test_repeated_benches_of_a_no_change_candidate_keep_it_at_most_alpha_in_total(tmp_path):
    # Every bench of the same pull request, measured on fresh pairs of heavy-tailed noise with no
    # change; at slot 1 each time, 30 benches would have 30 chances at the first slot's level.
    rng = np.random.default_rng(24)
    residuals = 0.1 * rng.standard_t(3, 20) / np.sqrt(3)
    total = 0.0
    for k in range(FAMILY + 2):
        slot = bench_slot(tmp_path, 9, f"bench-9-{k}")
        level = sq.slot_alpha(ALPHA, slot, FAMILY)
        if level == 0:
            continue                                               # past the family: nothing can be kept
        rule = sq.Rule(alpha_keep=level, floor=sq.to_log(1.0), target=sq.to_log(5.0), max_pairs=30)
        total += pw.simulate(residuals, 0.0, rule, n_sims=40, seed=k)[0]
    assert total <= ALPHA
    assert sum(sq.slot_alpha(ALPHA, bench_slot(tmp_path, 9, f"bench-9-{k}"), FAMILY)
               for k in range(FAMILY + 2)) <= ALPHA + 1e-12


def test_the_reply_says_which_level_the_bench_kept_at():
    said = level_note([ExperimentRecord.from_summary({"alpha": sq.slot_alpha(ALPHA, 3, FAMILY)})], 3)
    assert "bench 3" in said and f"{sq.slot_alpha(ALPHA, 3, FAMILY):.3g}" in said
    assert "nothing can be kept" in level_note([ExperimentRecord.from_summary({"alpha": 0.0})], FAMILY + 1)
