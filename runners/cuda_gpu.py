"""cuda_gpu: run CUDA kernels on a real NVIDIA GPU with cuda_sim's RawKernel surface.

The user's source plus a generated host (simcore/cuda_gpu_host.cuh) is compiled with nvcc into
one executable per kernel, run in a child process on the same request format as the simulator
host. It is kport's proof that cuda_sim is faithful; on machines without an NVIDIA GPU
``available()`` is False and its tests skip. Callers outside runners/ get it as
``runners.get("cuda_gpu")`` (RUNNER, at the end).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

from runners.base import LaunchRecord, Runner, Timing
from runners.lifetime import temp_folder
from runners.settings import load_settings
from runners.simbuild import SIMCORE, Diagnostic, failure_diagnostics
from runners.simhost import BufferArg, ScalarArg, launch_dims


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """True when nvcc is on PATH and nvidia-smi lists a GPU."""
    if not shutil.which("nvcc") or not shutil.which("nvidia-smi"):
        return False
    proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return proc.returncode == 0 and "GPU" in proc.stdout


NEEDS_GPU = "cuda_gpu needs an NVIDIA GPU (nvidia-smi lists one) and nvcc on PATH"
# nvcc's front end writes `file(line): error: message`, not the `file:line:col:` form of clang.
_NVCC_DIAG = re.compile(r"^(?P<file>[^\n(]+)\((?P<line>\d+)\): (?P<sev>error|warning)"
                        r"(?: #[\w-]+)?: (?P<msg>.*)$", re.M)

# One launch on the GPU. ``findings`` is always empty: real hardware has no sanitizer, so
# out-of-bounds accesses and races go unreported (cuda_sim finds them); a CUDA error is ``error``.
GpuRun = LaunchRecord


def _diagnostics(log: str) -> list[Diagnostic]:
    """nvcc's messages as Diagnostic records on the user's file and line; else the host
    compiler's (clang/gcc form), or the log's last line, so a failure is never silent."""
    found = [Diagnostic(Path(m["file"].strip()).name, int(m["line"]), 0, m["sev"], m["msg"])
             for m in _NVCC_DIAG.finditer(log)]
    return found if any(d.severity == "error" for d in found) else failure_diagnostics(log)


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
        """Run on the GPU; numpy arrays are updated in place (and are the record's outputs).
        ``reps`` timed launches follow, in ``timing``."""
        grid, block = launch_dims(grid, "grid"), launch_dims(block, "block")
        exe, log = self._build()
        if exe is None:
            return GpuRun(False, diagnostics=_diagnostics(log), source=self.code,
                          error=log[-2000:])
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
                return GpuRun(True, source=self.code,
                              error=f"host exited {proc.returncode}: {proc.stderr[-500:]}")
            result = json.loads(result_file.read_text())
            if result["status"] != "ok":
                return GpuRun(True, error=result.get("error", "fault"), printf=proc.stdout,
                              source=self.code)
            for value, path in arrays.values():
                value[...] = np.fromfile(path, dtype=value.dtype).reshape(value.shape)
            timing = None
            if reps:
                timing = Timing(result["median_ms"] / 1e3, result["min_ms"] / 1e3, result["reps"])
            return GpuRun(True, outputs=[value for value, _ in arrays.values()],
                          printf=proc.stdout, source=self.code, timing=timing)


# The lambda reads the module's ``available`` at each call, so a test can stand one in.
RUNNER = Runner("cuda_gpu", "cuda", hardware=True, kernel=RawKernel, needs=NEEDS_GPU,
                probe=lambda: available())
