"""The image's exact install set (the Dockerfile's EXTRAS) carries what App authentication needs
(issue 12: `.[bot]` lacked githubkit[auth-app], so the image failed before its first request, while
the dev venv worked only because other extras pulled PyJWT in)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata

from packaging.requirements import Requirement

from conftest import ROOT


def image_extras() -> list[str]:
    m = re.search(r"^ARG EXTRAS=(\S+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert m, "the Dockerfile declares ARG EXTRAS=..."
    return m.group(1).split(",")


def closure(dist: str, extras: list[str]) -> set[str]:
    """Every distribution `pip install dist[extras]` brings (read from the installed metadata)."""
    seen: set[str] = set()
    todo = [(dist, tuple(extras))]
    while todo:
        name, wanted = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if (key, wanted) in seen:
            continue
        seen.add((key, wanted))
        for raw in metadata.requires(name) or []:
            req = Requirement(raw)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *wanted)):
                todo.append((req.name, tuple(sorted(req.extras))))
    return {k for k, _ in seen}


def test_the_image_install_set_brings_app_auth():
    dists = closure("autoresearch", image_extras())
    assert {"pyjwt", "cryptography"} <= dists, sorted(dists)


def test_app_jwt_is_made_with_only_the_image_install_set_importable(tmp_path):
    """App authentication (the JWT githubkit signs) in a fresh interpreter where every installed
    distribution outside the image's install set cannot be imported."""
    allowed = closure("autoresearch", image_extras())
    blocked = sorted(top for top, owners in metadata.packages_distributions().items()
                     if not {re.sub(r"[-_.]+", "-", o).lower() for o in owners} & allowed)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_path = tmp_path / "app.pem"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    code = f"""
import importlib.abc, sys
BLOCKED = set({json.dumps(blocked)})
class Outside(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{{name}} is not in the image's install set", name=name)
sys.meta_path.insert(0, Outside())
from githubkit import AppAuthStrategy
from bot.github import _client
from bot.settings import Settings
s = Settings.from_env({{"AUTORESEARCH_APP_ID": "4242", "AUTORESEARCH_PRIVATE_KEY_PATH": {str(key_path)!r},
                       "AUTORESEARCH_WEBHOOK_SECRET": "s"}})
strategy = AppAuthStrategy(s.app_id, s.private_key())
print(strategy.get_auth_flow(_client(strategy, s)).get_jwt())
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import jwt
    claims = jwt.decode(proc.stdout.strip(), public, algorithms=["RS256"])
    assert str(claims["iss"]) == "4242"
