"""What counts as a credential, in one place. Pure.

Target code (builds, benchmarks, checks, agent edits) must never see these: the sandbox builds
its environment from an allow-list and refuses these names even when a config asks for them.
"""
from __future__ import annotations

import re

SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PRIVATE|CREDENTIAL|API_KEY|_KEY$|_KEY_PATH$|^AWS_|^GH_"
                         r"|^GITHUB_|^AUTORESEARCH_(APP|WEBHOOK|REDIS|PRIVATE|DASHBOARD)", re.I)


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))
