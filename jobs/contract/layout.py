"""Where a run of the bot lives: one folder per run, `<workdir>/<owner>/<repo>/<run_id>/`:

    repo/          the clone at the base commit (the pipeline's target; its worktrees and refs)
    candidates/    maintainer patches copied from the repo's `.github/autoresearch/candidates/`
    prepared.json  what `jobs.run.preparation.prepare` made: base, config, the offline research, candidates
    out/           the pipeline's own files: state.json, experiments.jsonl, research.md, summary.json, pr.md
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PREPARED = "prepared.json"


@dataclass(frozen=True)
class RunLayout:
    workdir: Path
    owner: str
    repo: str
    run_id: str

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    @property
    def root(self) -> Path:
        return Path(self.workdir) / self.owner / self.repo / self.run_id

    @property
    def clone(self) -> Path:
        return self.root / "repo"

    @property
    def candidates(self) -> Path:
        return self.root / "candidates"

    @property
    def prepared(self) -> Path:
        return self.root / PREPARED

    @property
    def out(self) -> Path:
        return self.root / "out"
