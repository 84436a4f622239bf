#!/usr/bin/env bash
# The image check (README, "Docker"): builds the App's image (from a Debian base made here with
# debootstrap when no registry can be pulled), starts compose.yaml's stack on the host network and
# follows one signed issue_comment through nginx to a draft PR on the fake GitHub, the worker's
# bubblewrap sandbox included. Needs root (it starts dockerd when none answers), docker.io,
# docker-compose (or the compose plugin), debootstrap, and the test venv (`make test` makes it).
#   sudo deploy/image-check.sh [--base auto|local|registry] [--rebuild-base] [--keep]
# Exit 0 passed, 1 failed, 77 this host cannot run it. METRIC lines: sizes and times.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || { echo "no $PYTHON: run 'make test' (or set PYTHON) to make the venv first" >&2; exit 77; }
exec "$PYTHON" deploy/image_check.py "$@"
