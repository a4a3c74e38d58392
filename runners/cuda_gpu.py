"""cuda_gpu: run CUDA kernels on a real NVIDIA GPU with cuda_sim's RawKernel surface.

The user's source plus a generated host (simcore/cuda_gpu_host.cuh) is compiled with nvcc into
one executable per kernel, run in a child process on the same request format as the simulator
host. It is kport's proof that cuda_sim is faithful; on machines without an NVIDIA GPU
``available()`` is False and its tests skip.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from runners.lifetime import temp_folder
from runners.settings import load_settings
from runners.simbuild import SIMCORE, parse_diagnostics
from runners.simhost import BufferArg, ScalarArg, launch_dims


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """True when nvcc is on PATH and nvidia-smi lists a GPU."""
    if not shutil.which("nvcc") or not shutil.which("nvidia-smi"):
        return False
    proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return proc.returncode == 0 and "GPU" in proc.stdout


@dataclass
class GpuRun:
    compiled: bool
    error: str = ""
    diagnostics: list = field(default_factory=list)
    printf: str = ""
    median_ms: float | None = None

    @property
    def ok(self) -> bool:
        return self.compiled and not self.error


_MAIN = """
#line 1 "kport-gpu-host"
#include "{host}"
int main(int argc, char** argv) {{ return __kp_gpu::host_main(argc, argv, &{name}); }}
"""


class RawKernel:
    """Same surface as cuda_sim.RawKernel: ``k(grid, block, args, shared_mem=0)``."""

    def __init__(self, code: str, name: str, options=(), *, filename: str = "kernel.cu"):
        self.code, self.name, self.options, self.filename = code, name, tuple(options), filename

    def _build(self) -> tuple[Path | None, str]:
        settings = load_settings()
        source = (f'#line 1 "{self.filename}"\n{self.code}\n'
                  + _MAIN.format(host=SIMCORE / "cuda_gpu_host.cuh", name=self.name))
        flags = ["-O2", "-std=c++17", "-arch=native", "-lineinfo", *self.options]
        key = hashlib.sha256((source + "\0".join(flags)).encode()).hexdigest()[:32]
        folder = settings.build_cache_dir / "cuda_gpu" / key
        exe = folder / "kernel"
        if exe.is_file():
            return exe, ""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "kernel.cu").write_text(source)
        proc = subprocess.run(["nvcc", *flags, str(folder / "kernel.cu"), "-o", str(exe)],
                              capture_output=True, text=True, timeout=600)
        return (exe if proc.returncode == 0 else None), proc.stdout + proc.stderr

    def launch(self, grid, block, args, shared_mem: int = 0, reps: int = 0) -> GpuRun:
        """Run on the GPU; numpy arrays are updated in place. ``reps`` timed launches follow."""
        grid, block = launch_dims(grid, "grid"), launch_dims(block, "block")
        exe, log = self._build()
        if exe is None:
            return GpuRun(False, diagnostics=parse_diagnostics(log), error=log[-2000:])
        with temp_folder("kport-gpu-") as tmp:
            work = Path(tmp)
            lines = ["groups {} {} {}".format(*grid), "tg {} {} {}".format(*block),
                     f"dyn_smem {shared_mem}", f"reps {reps}", f"result {work / 'result.json'}"]
            arrays = {}
            for i, value in enumerate(args):
                if isinstance(value, np.ndarray):
                    arg = BufferArg(f"arg{i}", np.ascontiguousarray(value), "inout")
                    path = work / f"buf{i}.bin"
                    arg.data.tofile(path)
                    lines.append(f"buffer {arg.name} {value.itemsize} {value.nbytes} inout {path}")
                    arrays[i] = (value, path)
                else:
                    raw = ScalarArg(f"arg{i}", np.asarray(value).tobytes()).raw
                    lines.append(f"scalar arg{i} {raw.hex() or '00'}")
            (work / "request.txt").write_text("\n".join(lines) + "\n")
            proc = subprocess.run([str(exe), str(work / "request.txt")], capture_output=True,
                                  text=True, timeout=600)
            result_file = work / "result.json"
            if not result_file.is_file():
                return GpuRun(True, error=f"host exited {proc.returncode}: {proc.stderr[-500:]}")
            result = json.loads(result_file.read_text())
            if result["status"] != "ok":
                return GpuRun(True, error=result.get("error", "fault"), printf=proc.stdout)
            for value, path in arrays.values():
                value[...] = np.fromfile(path, dtype=value.dtype).reshape(value.shape)
            return GpuRun(True, printf=proc.stdout, median_ms=result.get("median_ms"))
