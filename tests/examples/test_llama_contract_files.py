"""The llama.cpp example's contract is several files in .github/autoresearch/: every one the config
or a script refers to must exist beside this example and be copied by the README's set-up steps and by
matrix.sh (a user who followed a README that left digest.sh out got a build that cannot make
llama-digest, and every sample failed). Pure reads of the committed files."""
from __future__ import annotations

import re
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama.cpp"


def _referenced() -> set[str]:
    """Files the contract uses: `.github/autoresearch/<name>` in the config, `$HERE/<name>` in the scripts."""
    names = set(re.findall(r"\.github/autoresearch/([\w.-]+)", (EXAMPLE / "autoresearch.yml").read_text()))
    for script in ("bench.sh", "sim.sh", "digest.sh"):
        names |= set(re.findall(r'\$HERE/([\w.-]+)"', (EXAMPLE / script).read_text()))
    return names


def test_the_contract_refers_to_the_digest_program_and_the_scripts():
    assert {"bench.sh", "sim.sh", "digest.sh", "digest.cpp"} <= _referenced()


def test_every_file_the_contract_uses_exists_beside_the_example():
    missing = sorted(name for name in _referenced() if not (EXAMPLE / name).is_file())
    assert not missing


def test_the_readme_set_up_copies_every_file_the_contract_uses():
    readme = (EXAMPLE / "README.md").read_text()
    copied = set(re.findall(r"^cp \S+/examples/llama\.cpp/([\w.-]+)\s+\.github/autoresearch/\1\s*$", readme, re.M))
    assert _referenced() <= copied, sorted(_referenced() - copied)
    assert re.search(r"^git add .*\.github/autoresearch/(\s|$)", readme, re.M), "step 2 must commit the whole folder"


def test_matrix_sh_copies_the_same_files_into_its_targets():
    line = next(line for line in (EXAMPLE / "matrix.sh").read_text().splitlines()
                if '"$dir/.github/autoresearch/"' in line and line.strip().startswith("cp "))
    assert _referenced() <= set(re.findall(r'\$HERE/([\w.-]+)"', line))
