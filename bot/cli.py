"""The `autoresearch` console script: the pipeline commands from jobs.cli plus bot commands."""
from __future__ import annotations

import sys

from jobs import cli as jobs_cli


def register(sub) -> None:
    """Add bot/ commands (serve, worker, action) to the parser. Filled in by bot modules."""


def main(argv: list[str] | None = None) -> int:
    return jobs_cli.main(argv, extend=register)


if __name__ == "__main__":
    sys.exit(main())
