"""Find the C++ compiler the simulators use: KPORT_CXX, else clang++ >= 15 on PATH, else ziglang.

The simulators need clang specifically (ext_vector_type swizzles, _Float16, __bf16,
__builtin_LINE/COLUMN default arguments, -fsanitize=thread hooks); GCC will not do.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from runners.errors import KportError

MIN_CLANG = 15
_CLANG_NAMES = ["clang++"] + [f"clang++-{v}" for v in range(22, MIN_CLANG - 1, -1)]
GET_COMPILER_HINT = (
    "install one: `pip install ziglang` (ships clang), or a clang++ >= 15 on PATH, "
    "or set KPORT_CXX to a clang++ command"
)


class CompilerNotFound(KportError):
    """No usable clang++; the message says how to get one."""


@dataclass(frozen=True)
class Compiler:
    """A clang++ command line prefix, what it is, and what it needs inside the jail: its own
    install folders (``mounts``), the system's /usr (``system``) and ``env``."""

    command: tuple[str, ...]
    version: str  # e.g. "22.1.8"
    source: str  # "KPORT_CXX", "PATH" or "ziglang"
    mounts: tuple[Path, ...] = ()
    system: bool = True
    zig: bool = False  # zig's clang: caches go under the scratch folder (ZIG_*_CACHE_DIR)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def describe(self) -> str:
        return f"clang {self.version} ({self.source}: {shlex.join(self.command)})"

    def env(self, scratch: Path) -> dict[str, str]:
        """Environment of a jailed compile whose writable folder is ``scratch``."""
        if not self.zig:
            return {}
        return {"ZIG_GLOBAL_CACHE_DIR": str(scratch / "zig-global"),
                "ZIG_LOCAL_CACHE_DIR": str(scratch / "zig-local")}


def _clang_version(command: list[str]) -> str | None:
    try:
        out = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"clang version (\d+\.\d+(?:\.\d+)?)", out)
    return match.group(1) if match else None


def _candidates(cxx: str | None) -> list[tuple[list[str], str]]:
    if cxx:
        return [(shlex.split(cxx), "KPORT_CXX")]
    found = [([path], "PATH") for name in _CLANG_NAMES if (path := shutil.which(name))]
    spec = importlib.util.find_spec("ziglang")
    if spec is not None and spec.origin:
        # zig itself, not `python -m ziglang`: the jail then needs no Python
        found.append(([str(Path(spec.origin).parent / "zig"), "c++"], "ziglang"))
    return found


def _install(command: list[str], source: str) -> tuple[tuple[Path, ...], bool, bool]:
    """(folders the compiler needs, whether it needs /usr, whether it is zig)."""
    binary = Path(shutil.which(command[0]) or command[0]).resolve()
    if source == "ziglang":
        return (binary.parent,), False, True
    prefix = binary.parent.parent  # e.g. /opt/llvm for /opt/llvm/bin/clang++
    inside_usr = str(binary).startswith("/usr/")
    return (() if inside_usr else (prefix,)), True, False


@functools.lru_cache(maxsize=8)
def find_compiler(cxx: str | None = None) -> Compiler:
    """Return the compiler to use. ``cxx`` is the KPORT_CXX setting (None: search).

    Raises CompilerNotFound with how to get one; a KPORT_CXX that is not clang >= 15 is an error
    rather than a silent fallback.
    """
    rejected = []
    for command, source in _candidates(cxx):
        version = _clang_version(command)
        if version and int(version.split(".")[0]) >= MIN_CLANG:
            mounts, system, zig = _install(command, source)
            return Compiler(tuple(command), version, source, mounts, system, zig)
        rejected.append(f"{shlex.join(command)} ({'clang ' + version if version else 'not clang'})")
    if cxx:
        raise CompilerNotFound(
            f"KPORT_CXX={cxx!r} is not clang++ >= {MIN_CLANG}: {rejected[0]}; "
            "point it at clang++ >= 15 or unset it"
        )
    seen = f" (rejected: {', '.join(rejected)})" if rejected else ""
    raise CompilerNotFound(f"no clang++ >= {MIN_CLANG} found{seen}; {GET_COMPILER_HINT}")
