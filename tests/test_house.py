"""House rules that keep the codebase in shape: ruff clean, no module past 800 lines,
every KPORT_* variable declared in one place, CI runs the README's test command, the packages
import each other in one direction only."""

import ast
import re
import subprocess
import sys
from pathlib import Path

from runners.settings import ENV_VARS

ROOT = Path(__file__).resolve().parents[1]
CODE_DIRS = ("agent", "corpus", "kb", "runners", "evals", "tests")
MAX_LINES = 800


def _code_files(*suffixes):
    for top in CODE_DIRS:
        for path in (ROOT / top).rglob("*"):
            if path.suffix in suffixes and ".venv" not in path.parts:
                yield path


def test_ruff_is_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--quiet", *CODE_DIRS],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_module_passes_800_lines():
    too_long = {
        str(p.relative_to(ROOT)): n
        for p in _code_files(".py", ".h", ".hpp", ".cpp", ".cu", ".metal")
        if (n := len(p.read_text(errors="replace").splitlines())) > MAX_LINES
    }
    assert not too_long, f"split these along a real seam: {too_long}"


def test_every_kport_variable_is_declared():
    used = set()
    for path in _code_files(".py"):
        if path.parent.name == "tests":
            continue
        used |= set(re.findall(r"KPORT_[A-Z_]+", path.read_text()))
    undeclared = used - set(ENV_VARS)
    assert not undeclared, f"declare these in runners/settings.py ENV_VARS: {sorted(undeclared)}"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```(?:sh|bash)\n(.*?)\n```", readme, re.S)
    test_cmd = next(c for c in commands if "pytest" in c)
    assert test_cmd.strip() in (ROOT / ".ci" / "run").read_text()


# Each package may import those before it, never one after it (docs/architecture.md).
LAYERS = ("runners", "corpus", "kb", "agent", "evals")


def _imported_packages(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every absolute import in ``path``, those inside
    functions included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


def test_packages_import_only_the_layers_below_them():
    upward = []
    for rank, package in enumerate(LAYERS):
        for path in sorted((ROOT / package).rglob("*.py")):
            if ".venv" in path.parts:
                continue
            upward += [f"{path.relative_to(ROOT)}:{line} imports {target}"
                       for line, target in _imported_packages(path)
                       if target in LAYERS and LAYERS.index(target) > rank]
    assert not upward, "an import against the layer order " + " < ".join(LAYERS) + ":\n" + \
        "\n".join(upward)
