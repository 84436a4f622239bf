"""The layout's import rules (DESIGN.md): bot/ may import jobs/, never the reverse; kernels/ is C
and recipe data, and imports nothing from Python."""
import ast
from pathlib import Path

from conftest import ROOT


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_jobs_never_imports_bot():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "jobs").rglob("*.py") if "bot" in imported_modules(p)]
    assert offenders == []


def test_kernels_imports_no_project_python():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "kernels").rglob("*.py")
                 if imported_modules(p) & {"jobs", "bot"}]
    assert offenders == []
