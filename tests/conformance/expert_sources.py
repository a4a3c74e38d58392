"""Real expert Metal kernels, as they ship, for the compile-only conformance tests (issue 14).

Pinned sources, fetched with pip into ``$KPORT_EXPERT_CACHE`` (default
``~/.cache/kport/expert-sources``) the first time a test asks, never at import:
- llama.cpp's ggml-metal kernels (vendored by the llama-cpp-python sdist), each ``.metal`` file
  with its local headers inlined (``inline_local_includes``);
- mlx-lm's ``mx.fast.metal_kernel`` sources, read from its wheel with ``ast`` (``mlx_lm_kernels``).
- candle's CUDA and Metal kernel crates as the candle-nn sdist vendors them
  (``candle_kernel_trees``), for the KB's pairing of a tree (tests/knowledge/test_pairing.py).
MLX's own kernels are not among them: its wheels ship only the headers (the instantiating .metal
files and the sdist are not published), so they would need instantiations written here.
When the registry cannot be reached, ``SourcesUnavailable`` carries pip's last line.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

LLAMA_CPP = ("llama-cpp-python", "0.3.36")
MLX_LM = ("mlx-lm", "0.32.2")
GGML_METAL = "vendor/llama.cpp/ggml/src/ggml-metal"
# candle's CUDA and Metal kernel crates, as the candle-nn sdist vendors them (crates.io is not
# reachable here; PyPI is): candle-kernels/src (.cu) and candle-metal-kernels/src (.metal)
CANDLE = ("candle-nn", "0.4.2")
PINNED_SHA256 = {CANDLE: "55db19049207d958a8d2409cce678e7d527b99b1a935d3c36f6d910760fd1766"}


class SourcesUnavailable(Exception):
    """pip could not fetch a pinned package (no registry, no network); the message is pip's
    last line."""


def cache_root() -> Path:
    """Where the fetched files are kept: ``$KPORT_EXPERT_CACHE`` or ~/.cache/kport."""
    default = Path.home() / ".cache" / "kport" / "expert-sources"
    return Path(os.environ.get("KPORT_EXPERT_CACHE") or default).expanduser()


def _download(package: tuple[str, str], extra: tuple[str, ...], into: Path) -> Path:
    name, version = package
    if extra == SDIST_ONLY:
        return _download_sdist(package, into)
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                           *extra, f"{name}=={version}", "-d", str(into)],
                          capture_output=True, text=True, timeout=900)
    files = [p for p in into.iterdir() if p.is_file()]
    if proc.returncode != 0 or len(files) != 1:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        raise SourcesUnavailable(f"pip download {name}=={version}: "
                                 + (lines[-1].strip() if lines else "no file was downloaded"))
    return files[0]


# ``extra`` for a package whose source distribution pip cannot prepare here (a PyTorch
# extension's setup.py imports torch with CUDA): the pinned sdist is fetched as a file from the
# registry's JSON API, never built
SDIST_ONLY = ("--sdist-file",)
REGISTRY = "https://pypi.org/pypi"


def _download_sdist(package: tuple[str, str], into: Path) -> Path:
    name, version = package
    try:
        index = f"{REGISTRY}/{name}/json"
        with urllib.request.urlopen(index, timeout=60) as r:
            meta = json.load(r)
        url = next(u for u in meta["releases"][version] if u["packagetype"] == "sdist")
        target = into / url["filename"]
        # a registry mirror may answer with file URLs relative to the index page
        with urllib.request.urlopen(urllib.parse.urljoin(index, url["url"]), timeout=300) as r:
            target.write_bytes(r.read())
    except (OSError, ValueError, KeyError, StopIteration) as err:
        raise SourcesUnavailable(f"{name}=={version}: no sdist from {REGISTRY} ({err})") from None
    digest = url.get("digests", {}).get("sha256")
    got = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest and got != digest:
        raise SourcesUnavailable(f"{name}=={version}: the sdist's sha256 does not match the "
                                 "registry's")
    if package in PINNED_SHA256 and got != PINNED_SHA256[package]:
        raise SourcesUnavailable(f"{name}=={version}: the sdist's sha256 {got} is not the "
                                 f"pinned {PINNED_SHA256[package]}")
    return target


def fetch(package: tuple[str, str], wanted: str, extra: tuple[str, ...] = ()) -> Path:
    """The folder holding the files of ``package`` (pinned) whose archive path, less the
    sdist's top folder, starts with ``wanted``; downloaded once (the archive is kept for
    other prefixes) and extracted once per prefix. Raises SourcesUnavailable."""
    folder = cache_root() / f"{package[0]}-{package[1]}"
    done = folder / f".complete-{re.sub(r'[^A-Za-z0-9]+', '_', wanted)}"
    if done.is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / ".archive"
    archives = [p for p in kept.iterdir() if p.is_file()] if kept.is_dir() else []
    if not archives:
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            archive = _download(package, extra, Path(tmp))
            kept.mkdir(exist_ok=True)
            archives = [archive.rename(kept / archive.name)]
    archive = archives[0]
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            for member in z.namelist():
                if member.startswith(wanted) and not member.endswith("/"):
                    _write(folder / member, z.read(member))
    else:
        with tarfile.open(archive) as t:
            for member in t.getmembers():
                path = member.name.split("/", 1)[-1]
                if member.isfile() and path.startswith(wanted):
                    _write(folder / path, t.extractfile(member).read())
    done.write_text(f"{package[0]}=={package[1]}: {wanted}\n")
    return folder


def candle_kernel_trees() -> tuple[Path, Path]:
    """candle's CUDA kernel folder and its Metal kernel folder (candle-kernels/src,
    candle-metal-kernels/src) from the pinned candle-nn sdist. Raises SourcesUnavailable."""
    root = fetch(CANDLE, "candle-kernels/src/", SDIST_ONLY)
    fetch(CANDLE, "candle-metal-kernels/src/", SDIST_ONLY)
    return root / "candle-kernels" / "src", root / "candle-metal-kernels" / "src"


def _write(path: Path, data: bytes) -> None:
    if ".." in path.parts:
        raise SourcesUnavailable(f"the archive holds an unsafe path: {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[^\n]*$', re.M)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*$", re.M)
_GGML_EMBED_MARK = re.compile(r"^__embed_[\w.-]+__$", re.M)


def inline_local_includes(path: Path, roots: list[Path]) -> str:
    """``path``'s text with every ``#include "name"`` replaced by that file's text (looked up
    next to the including file, then in ``roots``), each file once, as a user pastes headers
    into one source: metal_sim, like MLX's metal_kernel, takes one text and no include path.
    llama.cpp's own embedded build does the same (its CMakeLists concatenates the headers);
    its placeholder line for that (``__embed_ggml-common.h__``) is dropped."""
    seen: set[Path] = set()

    def expand(file: Path) -> str:
        seen.add(file.resolve())
        text = _GGML_EMBED_MARK.sub("", _PRAGMA_ONCE.sub("", file.read_text()))

        def include(m: re.Match) -> str:
            found = next((d / m[1] for d in (file.parent, *roots) if (d / m[1]).is_file()), None)
            if found is None:
                raise FileNotFoundError(f"{file.name}: cannot find the included {m[1]!r}")
            return "" if found.resolve() in seen else expand(found)

        return _LOCAL_INCLUDE.sub(include, text)

    return expand(path)


def ggml_metal_sources() -> dict[str, str]:
    """Each of llama.cpp's ggml-metal kernel files (by file name) with its headers inlined;
    the files only other files include are left out. Raises SourcesUnavailable."""
    root = fetch(LLAMA_CPP, GGML_METAL.rsplit("/", 1)[0] + "/") / GGML_METAL
    included = {m[1] for p in root.glob("kernels/*") for m in _LOCAL_INCLUDE.finditer(
        p.read_text())}
    return {p.name: inline_local_includes(p, [root, root.parent])
            for p in sorted(root.glob("kernels/*.metal")) if p.name not in included}


@dataclass(frozen=True)
class ExpertKernel:
    """One ``mx.fast.metal_kernel(...)`` call of mlx-lm: its arguments, or why they cannot
    be read without running mlx-lm (``skipped``)."""

    where: str  # file:line in the wheel
    name: str = ""
    input_names: tuple[str, ...] = ()
    output_names: tuple[str, ...] = ()
    source: str = ""
    header: str = ""
    atomic_outputs: bool = False
    skipped: str = ""


def mlx_lm_kernels() -> list[ExpertKernel]:
    """Every ``mx.fast.metal_kernel`` call in the mlx-lm wheel, its arguments evaluated from
    the constants, f-strings and parameter defaults around it. Raises SourcesUnavailable."""
    root = fetch(MLX_LM, "mlx_lm/")
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        where = str(path.relative_to(root))
        found += _KernelCalls(where).collect(tree)
    return found


class _Unknown(Exception):
    """An expression whose value is known only when mlx-lm runs."""


class _KernelCalls:
    """Walks a module, keeping the values of simple assignments (module, then function
    scope, parameters at their defaults), and reads each metal_kernel call against them."""

    def __init__(self, where: str):
        self.where, self.found = where, []

    def collect(self, tree: ast.Module) -> list[ExpertKernel]:
        self._block(tree.body, {})
        return self.found

    def _block(self, body: list[ast.stmt], scope: dict) -> None:
        for stmt in body:
            for node in ast.walk(stmt) if not isinstance(stmt, ast.FunctionDef) else ():
                if isinstance(node, ast.Call) and _is_metal_kernel(node.func):
                    self.found.append(self._kernel(node, scope))
            if isinstance(stmt, ast.FunctionDef):
                self._block(stmt.body, {**scope, **self._defaults(stmt.args, scope)})
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                    stmt.targets[0], ast.Name):
                try:
                    scope[stmt.targets[0].id] = _value(stmt.value, scope)
                except _Unknown:
                    scope.pop(stmt.targets[0].id, None)
            elif isinstance(stmt, ast.If):
                try:
                    self._block(stmt.body if _value(stmt.test, scope) else stmt.orelse, scope)
                except _Unknown:
                    pass

    @staticmethod
    def _defaults(args: ast.arguments, scope: dict) -> dict:
        named = args.posonlyargs + args.args
        out = {}
        for arg, default in zip(named[len(named) - len(args.defaults):], args.defaults,
                                strict=True):
            try:
                out[arg.arg] = _value(default, scope)
            except _Unknown:
                pass
        return out

    def _kernel(self, call: ast.Call, scope: dict) -> ExpertKernel:
        where = f"{self.where}:{call.lineno}"
        args = {}
        for kw in call.keywords:
            try:
                args[kw.arg] = _value(kw.value, scope)
            except _Unknown as err:
                return ExpertKernel(where, skipped=f"`{kw.arg}` is computed at run time "
                                    f"({err})")
        return ExpertKernel(where, args["name"], tuple(args["input_names"]),
                            tuple(args["output_names"]), args["source"], args.get("header", ""),
                            bool(args.get("atomic_outputs", False)))


def _is_metal_kernel(func: ast.expr) -> bool:
    return isinstance(func, ast.Attribute) and func.attr == "metal_kernel"


_BINARY = {ast.Add: lambda a, b: a + b, ast.Mult: lambda a, b: a * b}


def _value(node: ast.expr, scope: dict):
    """The value of a constant expression over ``scope``; raises _Unknown otherwise."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in scope:
            return scope[node.id]
        raise _Unknown(f"`{node.id}`")
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e, scope) for e in node.elts]
    if isinstance(node, ast.JoinedStr):
        return "".join(_value(v, scope) if isinstance(v, ast.Constant) else _formatted(v, scope)
                       for v in node.values)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left, scope), _value(node.right, scope))
    if isinstance(node, ast.IfExp):
        return _value(node.body if _value(node.test, scope) else node.orelse, scope)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _value(node.operand, scope)
    raise _Unknown(ast.unparse(node)[:60])


def _formatted(node: ast.FormattedValue, scope: dict) -> str:
    if node.conversion != -1 or node.format_spec is not None:
        raise _Unknown(ast.unparse(node)[:60])
    return str(_value(node.value, scope))
