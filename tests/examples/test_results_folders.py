"""Every published result can be reproduced from its own command file, which says where it ran
(the CPU's vector ISA) and how busy the machine was (issue 27): a figure without them cannot be
compared with another machine's or re-run as it was."""
from __future__ import annotations

import re

import pytest

from conftest import ROOT

FOLDERS = sorted(p for p in ROOT.glob("examples/*/results/*") if p.is_dir())
ISA = re.compile(r"\b(AVX-?512|AVX2|NEON|SVE)", re.IGNORECASE)


def test_there_are_published_results_to_check():
    assert len(FOLDERS) >= 5, FOLDERS


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_each_results_folder_has_a_command_file_naming_the_isa_and_the_load(folder):
    command = folder / "command.txt"
    assert command.is_file(), f"{folder.relative_to(ROOT)}: no command.txt"
    text = command.read_text()
    assert ISA.search(text), f"{command.relative_to(ROOT)} names no vector ISA (AVX2, AVX-512, NEON, ...)"
    assert re.search(r"\bload\b", text), f"{command.relative_to(ROOT)} does not say how busy the machine was"
    commands = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert commands, f"{command.relative_to(ROOT)} has no command line, only comments"
