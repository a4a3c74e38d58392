"""Arithmetic counted by class in counting builds (runners/perf_model.py reads the totals).

A counting build compiles the TU to LLVM IR with SanitizerCoverage (every basic block calls
``__sanitizer_cov_trace_pc_guard``, after -O2, so the blocks are the optimised code's). Here
each of those calls becomes ``__kp_block(ID)`` (rt/counters.cpp counts executions per ID), and
each block's operations are tallied by class from the same IR: ``block_table``. At the end of a
run, executions x each block's mix = the launch's operations (``operation_counts``).

What counts: an instruction whose own source line is the user's (not kport's headers, entry
or MLX's signature), by opcode and element type (vectors count their lanes); calls of math
functions (libm's or LLVM's intrinsics) made for a user line count as transcendental, and the
other arithmetic of kport's math, collective, atomic and simulator functions does not.
Conversions, selects, address arithmetic folded into getelementptr, loads and stores are not
arithmetic here (memory is counted by counters.cpp).
"""

from __future__ import annotations

import re

CLASSES = ("fp32", "fp16", "fp64", "int", "int_mul", "transcendental")
COVERAGE_FLAGS = ("-fsanitize-coverage=bb,no-prune,trace-pc-guard",)
TABLE_FILE = "blocks.json"  # beside kernel.so in the build cache: per block ID its operations

_GUARD = re.compile(r"call void @__sanitizer_cov_trace_pc_guard\(ptr (?:@[\w.$]+|"
                    r"getelementptr [^()]*\([^()]*\))\)")
_META = re.compile(r"^!(\d+) = (?:distinct )?!(\w+)\((.*)\)\s*$", re.M)
_FIELD = re.compile(r"(\w+): (!\d+|\"(?:[^\"\\]|\\.)*\"|[\w.-]+)")
_DBG = re.compile(r"!dbg !(\d+)")
_INSTR = re.compile(r"^\s*(?:%[\w.]+ = )?(?P<op>[a-z]+)\b(?P<rest>.*)$")
_TYPE = re.compile(r"<(\d+) x (half|bfloat|float|double|i\d+)>|\b(half|bfloat|float|double|"
                   r"i\d+)\b")
_CALLEE = re.compile(r"@([\w.$]+)\(")

_FP_OPS = {"fadd", "fsub", "fmul", "fcmp"}
_INT_OPS = {"add", "sub", "shl", "lshr", "ashr", "and", "or", "xor", "icmp"}
_INT_MUL = {"mul", "udiv", "sdiv", "urem", "srem"}
_FP_CLASS = {"float": "fp32", "half": "fp16", "bfloat": "fp16", "double": "fp64"}
_MATH = {"exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "logb", "sin", "cos",
         "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh",
         "atanh", "pow", "powi", "sqrt", "cbrt", "erf", "erfc", "hypot", "fmod", "tgamma",
         "lgamma", "sincos", "sinpi", "cospi", "rsqrt", "erfinv", "remainder"}
_FP_INTRINSICS = {"fma", "fmuladd", "minnum", "maxnum", "minimum", "maximum", "minimumnum",
                  "maximumnum", "fabs", "floor", "ceil", "trunc", "round", "rint", "nearbyint",
                  "roundeven", "copysign"}
_INT_INTRINSICS = {"smax", "smin", "umax", "umin", "abs", "ctpop", "ctlz", "cttz", "fshl",
                   "fshr", "bitreverse", "bswap"}
# kport functions whose inside is the simulator's business, not the kernel's arithmetic
_INTERNAL = re.compile(r"^(simd_|quad_|simdgroup_|__shfl|__ballot|__any|__all|__syncwarp|"
                       r"__syncthreads|threadgroup_barrier|atomic|__kp_|__reduce|__match|"
                       r"__activemask|store|load|make_)")
_OWN_FILES = {"kernel.cpp", "kport-entry", "mlx-signature", "<built-in>"}


def is_user_file(name: str) -> bool:
    """Whether a DIFile name is the user's (not kport's headers, entry code or MLX's
    signature)."""
    return bool(name) and name not in _OWN_FILES and "/kport/" not in name \
        and not name.startswith("kport/")


class _Debug:
    """The IR's debug metadata: per DILocation its file, its function and where it was
    inlined."""

    def __init__(self, ir: str):
        self.nodes = {int(m[1]): (m[2], dict(_FIELD.findall(m[3]))) for m in _META.finditer(ir)}
        self._chains: dict[int, list[tuple[str, str]]] = {}

    def _ref(self, value: str | None) -> int | None:
        return int(value[1:]) if value and value.startswith("!") else None

    def _scope(self, ref: int | None) -> tuple[str, str]:
        """(file name, function name) of a scope."""
        file, func, seen = "", "", 0
        while ref is not None and seen < 64:
            kind, fields = self.nodes.get(ref, ("", {}))
            if not file and "file" in fields:
                f = self.nodes.get(self._ref(fields["file"]), ("", {}))[1]
                file = f.get("filename", "").strip('"')
            if kind == "DISubprogram":
                func = fields.get("name", "").strip('"')
                break
            ref, seen = self._ref(fields.get("scope")), seen + 1
        return file, func

    def chain(self, loc: int) -> list[tuple[str, str]]:
        """[(file, function)] from the instruction's own location out through inlinedAt."""
        if loc not in self._chains:
            out, ref = [], loc
            while ref is not None and len(out) < 64:
                kind, fields = self.nodes.get(ref, ("", {}))
                if kind != "DILocation":
                    break
                out.append(self._scope(self._ref(fields.get("scope"))))
                ref = self._ref(fields.get("inlinedAt"))
            self._chains[loc] = out
        return self._chains[loc]


def _lanes_and_class(text: str) -> tuple[int, str | None]:
    m = _TYPE.search(text)
    if not m:
        return 1, None
    lanes, elem = (int(m[1]), m[2]) if m[1] else (1, m[3])
    return lanes, _FP_CLASS.get(elem, "int")


def _base_name(callee: str) -> str:
    """expf -> exp, llvm.exp.f32 -> exp, _ZN4__kp2lm3expEf stays itself (not math)."""
    if callee.startswith("llvm."):
        return callee.split(".")[1]
    if callee.startswith("__") and callee.endswith("_finite"):
        callee = callee[2:-7]
    return callee[:-1] if callee.endswith(("f", "l")) and callee[:-1] in _MATH else callee


def classify(line: str) -> dict[str, int]:
    """The operations of one IR instruction by class ({} for none)."""
    m = _INSTR.match(line)
    if not m:
        return {}
    op, rest = m["op"], m["rest"]
    if op in ("call", "tail", "notail", "musttail"):
        callee = _CALLEE.search(rest)
        if not callee:
            return {}
        name = _base_name(callee[1])
        lanes, cls = _lanes_and_class(rest)
        if name in _MATH:
            return {"transcendental": lanes}
        if callee[1].startswith("llvm.") and name in _FP_INTRINSICS and cls in CLASSES:
            return {cls: lanes}
        if callee[1].startswith("llvm.") and name in _INT_INTRINSICS:
            return {"int": lanes}
        return {}
    if op in _FP_OPS or op in ("fdiv", "frem"):
        lanes, cls = _lanes_and_class(rest)
        if cls is None or cls == "int":
            return {}
        # a division is a reciprocal (special-function unit) and a multiply on GPUs
        return {cls: lanes, "transcendental": lanes} if op in ("fdiv", "frem") else {cls: lanes}
    if op in _INT_OPS or op in _INT_MUL:
        lanes, cls = _lanes_and_class(rest)
        return {("int_mul" if op in _INT_MUL else "int"): lanes} if cls == "int" else {}
    return {}


def _user_ops(line: str, chain: list[tuple[str, str]]) -> dict[str, int]:
    """What one instruction adds: by its own class when its line is the user's; a math call
    made inside kport's code for a user line as transcendental; else nothing."""
    first = next((i for i, (f, _) in enumerate(chain) if is_user_file(f)), None)
    if first is None:
        return {}
    ops = classify(line)
    if first == 0:
        return ops
    called = chain[first - 1][1]  # the kport function the user's line called
    if "transcendental" in ops and "call" in line:
        return {"transcendental": ops["transcendental"]}
    if _base_name(called) in _MATH or _INTERNAL.match(called):
        return {}
    return ops


def block_table(ir: str) -> tuple[str, list[list[int]]]:
    """(the IR with each coverage call made ``__kp_block(ID)``, per ID the block's operations
    as counts in CLASSES order)."""
    debug = _Debug(ir)
    table: list[list[int]] = []
    out: list[str] = []
    current: list[int] | None = None
    for line in ir.split("\n"):
        stripped = line.strip()
        if stripped.endswith(":") or re.match(r"^[\w.$\"-]+:\s*(;.*)?$", line) or \
                line.startswith(("define ", "}")):
            current = None  # a new block, or outside functions: not yet counted
        guard = _GUARD.search(line)
        if guard:
            current = [0] * len(CLASSES)
            table.append(current)
            line = line[:guard.start()] + f"call void @__kp_block(i32 {len(table) - 1})" + \
                line[guard.end():]
        elif current is not None:
            dbg = _DBG.search(line)
            if dbg:
                for cls, n in _user_ops(line, debug.chain(int(dbg[1]))).items():
                    current[CLASSES.index(cls)] += n
        out.append(line)
    text = "\n".join(out)
    text = text.replace("declare void @__sanitizer_cov_trace_pc_guard(ptr)",
                        "declare void @__kp_block(i32)")
    text = text.replace("@__sanitizer_cov_trace_pc_guard_init", "@__kp_block_init")
    return text, table


def operation_counts(blocks: list[list[int]], table: list[list[int]]) -> dict[str, int]:
    """``ops_<class>`` totals of a run: ``blocks`` is [[ID, executions]] from the host."""
    totals = [0] * len(CLASSES)
    for ident, runs in blocks:
        if 0 <= ident < len(table):
            for i, n in enumerate(table[ident]):
                totals[i] += n * runs
    return {f"ops_{c}": totals[i] for i, c in enumerate(CLASSES)}
