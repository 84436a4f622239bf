"""GitHub's REST API description (`@octokit/openapi` from npm, pinned, installed into a cache dir the
way the webhook examples are) and a validator of the fake GitHub's responses against it
(openapi-core), so the fake cannot drift from what the real API sends."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

PACKAGE = "@octokit/openapi"
VERSION = "23.0.2"          # pinned; tests/system-deps.sh installs the same version


def install_prefix() -> Path:
    """The folder npm installs into (`npm install --prefix`); tests/system-deps.sh uses the same."""
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "autoresearch-tests" / f"openapi-{VERSION}"


def spec_path() -> Path:
    return install_prefix() / "node_modules" / PACKAGE / "generated" / "api.github.com.json"


def install_spec() -> Path:
    """`npm install` the pinned description once; raise (the fixture fails, never skips) without npm."""
    path = spec_path()
    if path.is_file():
        return path
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(f"npm is not installed: it is needed to install {PACKAGE}@{VERSION} (GitHub's "
                           "OpenAPI description). Run `make system-deps` or apt-get install npm.")
    prefix = install_prefix()
    prefix.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save",
                           f"{PACKAGE}@{VERSION}"], capture_output=True, text=True, timeout=600)
    if proc.returncode or not path.is_file():
        raise RuntimeError(f"npm install {PACKAGE}@{VERSION} failed:\n{proc.stdout}\n{proc.stderr}")
    return path


# Templates whose last parameter holds slashes (`heads/main`, `.github/autoresearch.yml`): openapi-core
# matches a parameter within one segment, so these are named explicitly.
SLASHED = [(re.compile(r"^/repos/[^/]+/[^/]+/git/ref/.+$"), "/repos/{owner}/{repo}/git/ref/{ref}"),
           (re.compile(r"^/repos/[^/]+/[^/]+/contents/.+$"), "/repos/{owner}/{repo}/contents/{path}")]


@lru_cache(maxsize=1)
def openapi():
    from openapi_core import Config, OpenAPI
    spec = json.loads(install_spec().read_text())
    # The description itself is GitHub's (validated upstream); checking it again takes minutes.
    return OpenAPI.from_dict(spec, config=Config(spec_validator_cls=None))


def violations(method: str, path: str, query: dict, status: int, body: bytes, content_type: str,
               headers: dict[str, str]) -> list[str]:
    """What is wrong with one response of the fake, per the description ([] if nothing)."""
    from openapi_core.testing import MockRequest, MockResponse
    pattern = next((template for rx, template in SLASHED if rx.match(path)), None)
    request = MockRequest("https://api.github.com", method.lower(), path, args=query, path_pattern=pattern)
    response = MockResponse(body, status_code=status, content_type=content_type, headers=headers)
    try:
        openapi().validate_response(request, response)
    except Exception as exc:         # openapi-core's errors carry the schema errors as their cause
        cause = exc.__cause__
        details = [str(e).split("\n")[0] for e in getattr(cause, "schema_errors", [])][:5]
        return [f"{method} {path} -> {status}: {exc}"[:300] + "".join(f"\n  - {d}" for d in details)]
    return []
