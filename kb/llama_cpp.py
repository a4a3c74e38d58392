"""Import llama.cpp's CUDA and Metal kernels as analogue pairs.

Takes a llama.cpp checkout, any folder holding one (such as an unpacked ``llama-cpp-python``
sdist, which vendors llama.cpp), or the sdist archive itself (.tar.gz / .zip). Only
``ggml/src/ggml-cuda`` and ``ggml/src/ggml-metal`` are read; kernels are paired across the two by
op name and content (kb/pairing.py: ``soft_max_f32`` <-> ``kernel_soft_max``).
"""

from __future__ import annotations

import re
import tarfile
import zipfile
from pathlib import Path

from kb.chunks import Chunk
from kb.ingest import IngestReport, ingest
from kb.pairing import PairingReport, pair_kernels
from runners.errors import KportError
from runners.lifetime import temp_folder

CUDA_SUB = Path("ggml/src/ggml-cuda")
METAL_SUB = Path("ggml/src/ggml-metal")


class LlamaCppError(KportError):
    """The archive or folder does not hold llama.cpp's ggml-cuda and ggml-metal sources."""


def _find_root(folder: Path) -> Path | None:
    for cand in [folder, *sorted(p.parent.parent.parent for p in folder.rglob("ggml-cuda")
                                 if p.is_dir() and p.parent.name == "src")]:
        if (cand / CUDA_SUB).is_dir() and (cand / METAL_SUB).is_dir():
            return cand
    return None


KERNEL_FILES = re.compile(r"(^|/)ggml/src/ggml-(cuda|metal)/")
GGML_FILES = re.compile(r"(^|/)ggml/(include|src)/")  # the kernels and the headers they include


def _extract(archive: Path, dest: Path, wanted: re.Pattern = KERNEL_FILES) -> None:
    if tarfile.is_tarfile(archive):
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if wanted.search(m.name) and m.isfile()]
            tar.extractall(dest, members=members, filter="data")
    elif zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            for name in z.namelist():
                if wanted.search(name) and not name.endswith("/") and ".." not in name:
                    z.extract(name, dest)
    else:
        raise LlamaCppError(f"{archive}: not a .tar.gz or .zip archive; pass the llama-cpp-python "
                            "sdist (pip download --no-binary :all: llama-cpp-python) or a "
                            "llama.cpp checkout")


def version_of(path: Path) -> str:
    m = re.search(r"(\d+\.\d+\.\d+)", path.name)
    return m.group(1) if m else path.name


def import_llama_cpp(path: Path, source: str | None = None
                     ) -> tuple[list[Chunk], IngestReport, PairingReport]:
    """Chunks of llama.cpp's CUDA and Metal kernels, paired by op name and content, the
    ingestion report and the pairing report."""
    path = Path(path)
    source = source or f"llama.cpp:{version_of(path)}"
    if not path.exists():
        raise LlamaCppError(f"{path}: no such file or folder")
    with temp_folder("kport-llama-") as tmp:
        folder = path
        if path.is_file():
            _extract(path, Path(tmp))
            folder = Path(tmp)
        root = _find_root(folder)
        if root is None:
            raise LlamaCppError(f"{path}: no ggml/src/ggml-cuda and ggml/src/ggml-metal inside; "
                                "pass a llama.cpp checkout or the llama-cpp-python sdist")
        cuda, report = ingest(root / CUDA_SUB, source)
        metal, metal_report = ingest(root / METAL_SUB, source)
        report.merge(metal_report)
        cuda = [c.with_meta(path=f"ggml-cuda/{c.metadata['path']}") for c in cuda
                if c.metadata.get("language") == "cuda"]
        metal = [c.with_meta(path=f"ggml-metal/{c.metadata['path']}") for c in metal
                 if c.metadata.get("language") == "metal"]
        chunks, pairing = pair_kernels(cuda, metal)
    report.chunks = len(chunks)
    report.pairs = pairing.paired
    return chunks, report, pairing
