"""tests/fakes/openapi.py installs GitHub's OpenAPI description itself when `make system-deps` has not:
into the folder it then reads from (it once installed one level too deep, into node_modules/node_modules,
and every bot test of a fresh machine run without `make test` failed with "npm install ... failed")."""
from __future__ import annotations

import json
import os

import pytest

from fakes import openapi


def stand_in_npm(tmp_path):
    """An npm that installs what `npm install --prefix DIR PACKAGE@VERSION` would: DIR/node_modules/PACKAGE."""
    tools = tmp_path / "tools"
    tools.mkdir()
    npm = tools / "npm"
    npm.write_text('#!/bin/sh\n'
                   'while [ "$1" != --prefix ]; do shift; done; prefix="$2"\n'
                   'echo "$prefix" >> "$NPM_LOG"\n'
                   'mkdir -p "$prefix/node_modules/@octokit/openapi/generated"\n'
                   'echo \'{"openapi": "3.0.3"}\' > "$prefix/node_modules/@octokit/openapi/generated/api.github.com.json"\n'
                   'echo "added 1 package"\n')
    npm.chmod(0o755)
    return tools


def test_the_description_is_installed_where_it_is_read_and_only_once(tmp_path, monkeypatch):
    log = tmp_path / "npm.log"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("NPM_LOG", str(log))
    monkeypatch.setenv("PATH", f"{stand_in_npm(tmp_path)}:{os.environ['PATH']}")
    path = openapi.install_spec()
    assert path == openapi.spec_path() and json.loads(path.read_text()) == {"openapi": "3.0.3"}
    assert log.read_text().split() == [str(tmp_path / "cache" / "autoresearch-tests" / f"openapi-{openapi.VERSION}")]
    assert openapi.install_spec() == path and len(log.read_text().split()) == 1     # installed once


def test_an_install_that_leaves_no_description_is_an_error_that_says_so(tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "npm").write_text('#!/bin/sh\necho "up to date"\n')
    (tools / "npm").chmod(0o755)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    with pytest.raises(RuntimeError, match="npm install @octokit/openapi@") as failed:
        openapi.install_spec()
    assert "up to date" in str(failed.value)
