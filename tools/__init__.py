"""Tools for working on autoresearch, run from a checkout (`python -m tools.loadbench`): not part of
the installed package (pyproject.toml packages `jobs` and `bot` only) nor of the App's image, and
never imported by them (tests/test_layering.py)."""
