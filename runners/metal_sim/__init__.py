"""metal_sim: run MLX `metal_kernel` bodies (and .metal files) on any machine, checked.

`metal_kernel` is a drop-in for `mx.fast.metal_kernel`; see runners/metal_sim/kernel.py. Callers
outside runners/ get it as ``runners.get("metal_sim")`` (RUNNER).
"""

from runners.base import Runner
from runners.metal_sim.kernel import CompileError, KernelFault, MetalKernel, SimRun, metal_kernel
from runners.metal_sim.library import MetalFunction, MetalLibrary, MetalRun

__all__ = ["RUNNER", "CompileError", "KernelFault", "MetalFunction", "MetalKernel",
           "MetalLibrary", "MetalRun", "SimRun", "metal_kernel"]

RUNNER = Runner("metal_sim", "metal", hardware=False, kernel=metal_kernel)
