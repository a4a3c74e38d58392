"""Inline PTX lowered to CUDA C++ (issue 16): the ``asm volatile("...")`` idioms real kernels use,
each rewritten as the CUDA intrinsics or plain C++ it means, so that cuda_sim compiles it (its
intrinsics are the ones docs/fidelity.md checks against real GPUs) and the translator maps it to
Metal with the rules it has for those intrinsics.

What is lowered (one instruction per statement, or a sequence of them on operands only):
- special registers read with ``mov``: ``%laneid``, ``%warpid`` (taken as the warp's index in
  its block, which is what kernels mean by it; PTX says the hardware may differ), ``%lanemask_*``,
  ``%tid``/``%ntid``/``%ctaid``/``%nctaid``;
- ``mov`` of registers, and packing/unpacking two halves (``mov.b32 %0, {%1, %2}``);
- loads and stores with any state space (global, shared, const, local, generic) and cache hint
  (``.nc``, ``.cg``, ``.ca``, ``.cs``, ``.lu``, ``.cv``, ``.L1::no_allocate``, ``.L2::*``),
  scalar or ``.v2``/``.v4``; hints change timing, not values. Loads and stores with a memory
  order (``.volatile``, ``.relaxed``, ``.acquire``, ``.release``) are not lowered: they order
  memory across threads, which plain C++ accesses would not;
- ``shfl.sync.{bfly,up,down,idx}.b32`` (the ``c`` operand's width), ``prmt.b32`` (default
  mode), ``lop3.b32`` with an immediate table, ``popc``, ``clz``, ``brev``;
- ``cvt`` between f32 and f16/bf16 (and their x2 packs) with ``.rn``, float to int with
  ``.rni``/``.rzi``/``.rmi``/``.rpi``, int to f32 with ``.rn``;
- ``fma.rn``/``add.rn``/``sub.rn``/``mul.rn`` of f32, ``min``/``max``, and the approximate
  functions ``ex2``, ``lg2``, ``rcp``, ``rsqrt``, ``sqrt``, ``sin``, ``cos``, ``tanh``
  (``.approx``: lowered to the exact function; a GPU's answer differs in the last bits, within
  the tolerances a float check uses — docs/fidelity.md "Inline PTX").

Anything else (``mma.sync``, ``ldmatrix``, ``cp.async``, predicates and ``.reg`` blocks, an
operand kport cannot read) is not lowered: ``Lowered.unknown`` names it with its line, cuda_sim
refuses the kernel there, and the translator leaves a counted KPORT-TODO.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from runners.sourcetree import parse

# C++ type of each PTX element type in memory
_MEM_TYPE = {
    "b8": "unsigned char", "u8": "unsigned char", "s8": "signed char",
    "b16": "unsigned short", "u16": "unsigned short", "s16": "short", "f16": "unsigned short",
    "bf16": "unsigned short",
    "b32": "unsigned int", "u32": "unsigned int", "s32": "int", "f32": "float",
    "f16x2": "unsigned int", "bf16x2": "unsigned int",
    "b64": "unsigned long long", "u64": "unsigned long long", "s64": "long long",
    "f64": "double",
}
# what a register of each operand constraint holds
_FLOAT_REG = {"f": "float", "d": "double"}
_INT_REG = {"r": 32, "h": 16, "l": 64, "n": 32, "c": 8}
_SPECIAL = {
    "%laneid": "(({linear}) % 32u)",
    "%warpid": "(({linear}) / 32u)",
    "%lanemask_eq": "(1u << (({linear}) % 32u))",
    "%lanemask_lt": "((1u << (({linear}) % 32u)) - 1u)",
    "%lanemask_le": "((2u << (({linear}) % 32u)) - 1u)",
    "%lanemask_gt": "(~((2u << (({linear}) % 32u)) - 1u))",
    "%lanemask_ge": "(~((1u << (({linear}) % 32u)) - 1u))",
}
_LINEAR = "(threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x"
_XYZ = {"tid": "threadIdx", "ntid": "blockDim", "ctaid": "blockIdx", "nctaid": "gridDim"}
_APPROX = {"ex2": "exp2f", "lg2": "log2f", "rcp": "__frcp_rn", "rsqrt": "rsqrtf",
           "sqrt": "sqrtf", "sin": "sinf", "cos": "cosf", "tanh": "tanhf"}
_ROUNDED = {"fma": "__fmaf_rn", "add": "__fadd_rn", "sub": "__fsub_rn", "mul": "__fmul_rn"}
_TO_INT = {"rni": "rn", "rzi": "rz", "rmi": "rd", "rpi": "ru"}
_ORDERED = {"volatile", "relaxed", "acquire", "release", "acq_rel", "mmio"}
ASM_WORDS = ("asm", "__asm__", "__asm")
# a block's own registers: kind -> (operand constraint letter, C++ type)
_REG_KINDS = {"pred": ("b", "bool"), "b32": ("r", "unsigned int"), "u32": ("r", "unsigned int"),
              "s32": ("r", "int"), "f32": ("f", "float"), "b64": ("l", "unsigned long long"),
              "u64": ("l", "unsigned long long"), "s64": ("l", "long long")}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
            "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
_TYPED = {"b32": "unsigned int", "u32": "unsigned int", "s32": "int", "f32": "float",
          "b64": "unsigned long long", "u64": "unsigned long long", "s64": "long long"}
_SPACES = {"global", "shared", "const", "local", "param", "generic"}


@dataclass
class Operand:
    constraint: str  # "=r", "+f", "l", "n" ...
    expr: str  # the C++ expression, as written

    @property
    def reg(self) -> str:
        return self.constraint.lstrip("=+&")


@dataclass
class Asm:
    start: int  # byte offsets of the whole asm expression in the source
    end: int
    line: int  # 1-based
    template: str  # the instructions, C escapes and %% decoded
    operands: list[Operand]  # outputs first, then inputs (PTX numbers them so)


@dataclass
class Lowered:
    """The source with every lowered asm replaced; ``unknown``: (line, instruction, why)."""

    source: str
    lowered: int = 0
    lines: set[int] = field(default_factory=set)  # the lines of the lowered statements
    unknown: list[tuple[int, str, str]] = field(default_factory=list)


class _Unknown(Exception):
    pass


def find_asm(src: str) -> list[Asm]:
    """Every GNU ``asm(...)`` statement of ``src`` (tree-sitter), in file order."""
    data = src.encode()
    out = []
    stack = [parse(data, "cuda")]
    while stack:
        node = stack.pop()
        if node.type == "gnu_asm_expression":
            out.append(_read(node, data))
            continue
        stack.extend(reversed(node.children))
    return out


def _read(node, data: bytes) -> Asm:
    text = ""
    operands: list[Operand] = []
    for child in node.children:
        if child.type in ("string_literal", "concatenated_string"):
            text = _c_string(data[child.start_byte:child.end_byte].decode())
        elif child.type in ("gnu_asm_output_operand_list", "gnu_asm_input_operand_list"):
            for op in (c for c in child.named_children if c.type.startswith("gnu_asm_")):
                lit = next(c for c in op.children if c.type == "string_literal")
                expr = op.child_by_field_name("value")
                if expr is None:
                    expr = next(c for c in op.named_children if c.type != "string_literal")
                operands.append(Operand(_c_string(data[lit.start_byte:lit.end_byte].decode()),
                                        data[expr.start_byte:expr.end_byte].decode()))
    return Asm(node.start_byte, node.end_byte, node.start_point[0] + 1, text, operands)


def _c_string(literals: str) -> str:
    """Adjacent C string literals joined, their escapes decoded."""
    pieces = re.findall(r'"((?:[^"\\]|\\.)*)"', literals, re.S)
    joined = "".join(pieces)
    joined = re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m[1], m[1]), joined)
    return joined.replace("%%", "%")  # a literal % in an asm template


def lower_source(src: str, unknown=None) -> Lowered:
    """``src`` with each asm statement kport can lower replaced by its C++ (a block keeping the
    statement's line count); the others are listed in ``unknown`` and stay as written, or
    become ``unknown(index, instruction, why)`` (a statement) when that is given."""
    if "asm" not in src:
        return Lowered(src)
    data = src.encode()
    out, pos, result = [], 0, Lowered(src)
    for asm in find_asm(src):
        try:
            code = lower(asm)
        except _Unknown as why:
            instruction = " ".join(asm.template.split())[:80]
            result.unknown.append((asm.line, instruction, str(why)))
            if unknown is None:
                continue
            code = unknown(len(result.unknown) - 1, instruction, str(why))
        newlines = data[asm.start:asm.end].count(b"\n")
        out += [data[pos:asm.start], ("do { " + code + " } while (0)" + "\n" * newlines).encode()]
        pos = asm.end
        result.lowered += 1
        result.lines.add(asm.line)
    out.append(data[pos:])
    result.source = b"".join(out).decode()
    return result


def lower(asm: Asm) -> str:
    """The C++ statements of one asm statement; _Unknown says why it cannot be lowered. A
    ``{ ... }`` block may declare its own registers (``.reg .pred p;``, ``.reg .b32 r;``: C++
    locals), set predicates (``setp``) and guard instructions with them (``@p``, ``@!p``), as
    DeepSpeed's zero-filling predicated loads do."""
    body = re.sub(r"//[^\n]*", "", asm.template).strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    ops = list(asm.operands)
    local: dict[str, str] = {}
    decls, code = [], []
    for stmt in (s.strip() for s in body.split(";")):
        if not stmt:
            continue
        if m := re.fullmatch(r"\.reg\s+\.(\w+)\s+(.+)", stmt, re.S):
            kind = m[1]
            if kind not in _REG_KINDS:
                raise _Unknown(f".reg .{kind} registers")
            for name in (n.strip() for n in m[2].split(",")):
                if not re.fullmatch(r"[A-Za-z_]\w*", name):
                    raise _Unknown(f"register {name!r}")
                local[name] = f"%{len(ops)}"
                ops.append(Operand("+" + _REG_KINDS[kind][0], f"kport_ptx_{name}"))
                zero = "false" if kind == "pred" else "0"
                decls.append(f"{_REG_KINDS[kind][1]} kport_ptx_{name} = {zero};")
            continue
        for name, ref in local.items():
            stmt = re.sub(rf"(?<![%\w.]){re.escape(name)}\b", ref, stmt)
        guard = re.match(r"@(!?)\s*(%\d+)\s+(.*)$", stmt, re.S)
        if guard:
            pred = _operand(guard[2], ops)
            if pred.reg != "b":
                raise _Unknown(f"a guard on {guard[2]}, which is not a predicate")
            code.append(f"if ({guard[1]}{pred.expr}) {{ {_instruction(guard[3], ops)} }}")
        else:
            code.append(_instruction(stmt, ops))
    return " ".join(decls + code)


def _instruction(text: str, ops: list[Operand]) -> str:
    m = re.match(r"([a-z][\w.:]*)\s*(.*)$", text, re.S)
    if m is None:
        raise _Unknown(f"cannot read {text!r}")
    opcode, rest = m[1], m[2]
    parts = opcode.split(".")
    args = _split_args(rest)
    head = parts[0]
    if head == "mov":
        return _mov(parts, args, ops)
    if head == "setp" and len(parts) == 3 and parts[1] in _COMPARE and parts[2] in _TYPED:
        p, a, b = _need(args, 3, text)
        target = _operand(p, ops)
        if target.reg != "b":
            raise _Unknown(f"setp into {p}, which is not a predicate")
        return (f"{target.expr} = {_typed(a, parts[2], ops)} {_COMPARE[parts[1]]} "
                f"{_typed(b, parts[2], ops)};")
    if head == "selp" and len(parts) == 2 and parts[1] in _TYPED:
        d, a, b, c = _need(args, 4, text)
        pred = _operand(c, ops)
        if pred.reg != "b":
            raise _Unknown(f"selp on {c}, which is not a predicate")
        value = f"({pred.expr} ? {_typed(a, parts[1], ops)} : {_typed(b, parts[1], ops)})"
        return _set(d, value, ops, "f" if parts[1] == "f32" else "")
    if head in ("ld", "st"):
        return _memory(head, parts[1:], args, ops)
    if head == "shfl":
        return _shfl(parts, args, ops)
    if head == "prmt" and parts[1:] == ["b32"]:
        d, a, b, c = _need(args, 4, text)
        return _set(d, f"__byte_perm({_u32(a, ops)}, {_u32(b, ops)}, {_u32(c, ops)})", ops)
    if head == "lop3" and parts[1:] == ["b32"]:
        d, a, b, c, lut = _need(args, 5, text)
        return _set(d, _lop3([_u32(x, ops) for x in (a, b, c)], _immediate(lut, ops)), ops)
    if head in ("popc", "clz", "brev") and parts[1] in ("b32",):
        d, a = _need(args, 2, text)
        return _set(d, f"__{head}({_u32(a, ops)})", ops)
    if head == "cvt":
        return _cvt(parts[1:], args, ops, text)
    if head in _ROUNDED and parts[1:] in (["rn", "f32"], ["rn", "ftz", "f32"]):
        *srcs, = args[1:]
        return _set(args[0], f"{_ROUNDED[head]}({', '.join(_f32(s, ops) for s in srcs)})", ops,
                    "f")
    if head in _APPROX and "approx" in parts and parts[-1] == "f32":
        d, a = _need(args, 2, text)
        return _set(d, f"{_APPROX[head]}({_f32(a, ops)})", ops, "f")
    if head in ("min", "max") and len(parts) == 2 and parts[1] in ("f32", "s32", "u32"):
        d, a, b = _need(args, 3, text)
        if parts[1] == "f32":
            return _set(d, f"f{head}f({_f32(a, ops)}, {_f32(b, ops)})", ops, "f")
        cast = "int" if parts[1] == "s32" else "unsigned int"
        return _set(d, f"{head}(({cast})({_value(a, ops)}), ({cast})({_value(b, ops)}))", ops)
    raise _Unknown(f"PTX `{opcode}` is not lowered")


def _split_args(rest: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in rest:
        depth += ch in "{["
        depth -= ch in "}]"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _need(args: list[str], n: int, text: str) -> list[str]:
    if len(args) != n:
        raise _Unknown(f"{text!r} takes {n} operands")
    return args


def _operand(ref: str, ops: list[Operand]) -> Operand:
    m = re.fullmatch(r"%(\d+)", ref.strip())
    if m is None or int(m[1]) >= len(ops):
        raise _Unknown(f"operand {ref!r} is not one of the asm statement's")
    return ops[int(m[1])]


def _immediate(ref: str, ops: list[Operand]) -> int:
    ref = ref.strip()
    if re.fullmatch(r"%\d+", ref):
        ref = _operand(ref, ops).expr  # an "n" operand, or a literal passed in a register
    try:
        return int(ref.rstrip("uUlL"), 0)
    except ValueError:
        raise _Unknown(f"{ref!r} is not an immediate kport can read") from None


def _value(ref: str, ops: list[Operand]) -> str:
    """An input: the operand's expression (parenthesised) or an immediate as written."""
    ref = ref.strip()
    if ref.startswith("%") and ref[1:].isdigit():
        return f"({_operand(ref, ops).expr})"
    if re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)[uU]?", ref):
        return ref
    if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", ref):  # PTX's hex float: its bits
        return f"__uint_as_float(0x{ref[2:]}u)"
    raise _Unknown(f"operand {ref!r} is not one kport can read")


def _typed(ref: str, kind: str, ops: list[Operand]) -> str:
    """An input read as PTX type ``kind``: floats from a float register or an integer's bits,
    integers converted to the type's C++ integer."""
    if kind == "f32":
        return _f32(ref, ops)
    return f"(({_TYPED[kind]}){_int_value(ref, ops)})"


def _u32(ref: str, ops: list[Operand]) -> str:
    """An input as 32 bits: a float register's bits, an integer's value."""
    if ref.strip().startswith("%") and _operand(ref, ops).reg == "f":
        return f"__float_as_uint({_value(ref, ops)})"
    return f"((unsigned int){_value(ref, ops)})"


def _f32(ref: str, ops: list[Operand]) -> str:
    """An input as an f32: an integer register's bits read as float."""
    if ref.strip().startswith("%") and _operand(ref, ops).reg in ("r", "n"):
        return f"__uint_as_float((unsigned int){_value(ref, ops)})"
    return f"((float){_value(ref, ops)})"


def _set(dest: str, value: str, ops: list[Operand], kind: str = "") -> str:
    """``dest = value;`` where ``value`` is a 32-bit integer (``kind`` "") or float ("f")
    expression, converted to the destination register's kind by its bits."""
    op = _operand(dest, ops)
    if not op.constraint.startswith(("=", "+")):
        raise _Unknown(f"{dest} is written but is an input operand")
    if op.reg == "f" and kind != "f":
        value = f"__uint_as_float((unsigned int)({value}))"
    elif op.reg in ("r", "h", "l") and kind == "f":
        value = f"__float_as_uint({value})"
    return f"{op.expr} = {value};"


def _mov(parts: list[str], args: list[str], ops: list[Operand]) -> str:
    if len(parts) != 2 or len(args) != 2:
        raise _Unknown(f"PTX `{'.'.join(parts)}` is not lowered")
    dest, src = args
    src = src.strip()
    if src in _SPECIAL:
        return _set(dest, _SPECIAL[src].format(linear=_LINEAR), ops)
    m = re.fullmatch(r"%(tid|ntid|ctaid|nctaid)\.([xyz])", src)
    if m:
        return _set(dest, f"((unsigned int){_XYZ[m[1]]}.{m[2]})", ops)
    half = {"b32": 16, "b64": 32}.get(parts[1])
    if half and src.startswith("{"):  # pack: {lo, hi}
        lo, hi = _split_args(src[1:-1])
        wide = "unsigned int" if half == 16 else "unsigned long long"
        mask = "0xffffu" if half == 16 else "0xffffffffull"
        return (f"{_operand(dest, ops).expr} = (({wide})({_int_value(hi, ops)} & {mask}) << "
                f"{half}) | (({wide})({_int_value(lo, ops)} & {mask}));")
    if half and dest.strip().startswith("{"):  # unpack into {lo, hi}
        lo, hi = _split_args(dest.strip()[1:-1])
        whole = _int_value(src, ops)
        narrow = "unsigned short" if half == 16 else "unsigned int"
        return (f"{_operand(lo, ops).expr} = ({narrow})({whole}); "
                f"{_operand(hi, ops).expr} = ({narrow})(({whole}) >> {half});")
    if src.startswith("%") and src[1:].isdigit() or re.fullmatch(r"-?\w+", src):
        kind = "f" if parts[1] == "f32" or (src.startswith("%") and _operand(src, ops).reg == "f") \
            else ""
        value = _value(src, ops) if kind == "f" or not src.startswith("%") else _u32(src, ops)
        return _set(dest, value, ops, kind)
    raise _Unknown(f"mov from {src!r}")


def _int_value(ref: str, ops: list[Operand]) -> str:
    if ref.strip().startswith("%") and _operand(ref, ops).reg == "f":
        return f"__float_as_uint({_value(ref, ops)})"
    return _value(ref, ops)


def _memory(head: str, mods: list[str], args: list[str], ops: list[Operand]) -> str:
    if _ORDERED & set(mods):
        raise _Unknown(f"{head}.{'.'.join(mods)} orders memory across threads")
    if not mods or mods[-1] not in _MEM_TYPE:
        raise _Unknown(f"{head}.{'.'.join(mods)}: no element type kport knows")
    kind = mods[-1]
    lanes = next((int(m[1:]) for m in mods if re.fullmatch(r"v[248]", m)), 1)
    space = next((m for m in mods if m in _SPACES), "generic")
    ctype = _MEM_TYPE[kind]
    if len(args) != 2:
        raise _Unknown(f"{head} takes an address and a value")
    address, value = (args[1], args[0]) if head == "ld" else (args[0], args[1])
    m = re.fullmatch(r"\[\s*(%\d+)\s*(?:\+\s*(-?\d+)\s*)?\]", address.strip())
    if m is None:
        raise _Unknown(f"address {address!r} is not [%N] or [%N+offset]")
    base = _operand(m[1], ops).expr
    offset = int(m[2] or 0)
    const = "const " if head == "ld" else ""
    pointer = f"(({const}{ctype} *)(({const}char *)({base}) + {offset}))" if offset else \
        f"(({const}{ctype} *)({base}))"
    regs = _split_args(value.strip()[1:-1]) if value.strip().startswith("{") else [value]
    if len(regs) != lanes:
        raise _Unknown(f"{len(regs)} registers for a .v{lanes} access")
    del space  # every state space is plain memory here; the pointer says which in Metal
    float_mem = kind in ("f32", "f64")
    out = []
    for i, reg in enumerate(regs):
        at = f"{pointer}[{i}]"
        op = _operand(reg, ops)
        if head == "ld":
            if op.reg == "f" and not float_mem:
                out.append(f"{op.expr} = __uint_as_float({at});")
            elif op.reg != "f" and kind == "f32":
                out.append(f"{op.expr} = __float_as_uint({at});")
            else:
                out.append(f"{op.expr} = {at};")
        else:
            src = f"({op.expr})"
            if op.reg == "f" and not float_mem:
                src = f"__float_as_uint{src}"
            elif op.reg != "f" and kind == "f32":
                src = f"__uint_as_float{src}"
            out.append(f"{at} = ({ctype})({src});")
    return " ".join(out)


def _shfl(parts: list[str], args: list[str], ops: list[Operand]) -> str:
    if len(parts) != 4 or parts[1] != "sync" or parts[3] != "b32" or len(args) != 5:
        raise _Unknown(f"PTX `{'.'.join(parts)}` with {len(args)} operands is not lowered")
    mode = {"bfly": "__shfl_xor_sync", "up": "__shfl_up_sync", "down": "__shfl_down_sync",
            "idx": "__shfl_sync"}.get(parts[2])
    if mode is None or "|" in args[0]:
        raise _Unknown(f"shfl.sync.{parts[2]} (with a predicate output)")
    dest, a, b, c, mask = args
    try:
        clamp = _immediate(c, ops)
        width = str(32 - ((clamp >> 8) & 31))
    except _Unknown:
        width = f"(32 - ((((unsigned int){_value(c, ops)}) >> 8) & 31))"
    is_float = _operand(a, ops).reg == "f" if a.strip().startswith("%") else False
    value = _value(a, ops) if is_float else _u32(a, ops)
    call = f"{mode}({_u32(mask, ops)}, {value}, {_value(b, ops)}, {width})"
    return _set(dest, call, ops, "f" if is_float else "")


def _lop3(ins: list[str], lut: int) -> str:
    """PTX's lop3: bit i of the result is bit (a << 2 | b << 1 | c) of ``lut``, as a sum of
    the minterms the table sets."""
    if lut & 0xFF == 0:
        return "0u"
    if lut & 0xFF == 0xFF:
        return "0xffffffffu"
    terms = []
    for i in range(8):
        if lut >> i & 1:
            lits = [x if i >> (2 - k) & 1 else f"~{x}" for k, x in enumerate(ins)]
            terms.append("(" + " & ".join(lits) + ")")
    return "(" + " | ".join(terms) + ")"


def _cvt(mods: list[str], args: list[str], ops: list[Operand], text: str) -> str:
    mods = [m for m in mods if m != "ftz"]  # .sat (clamping) is not lowered: no match below
    if len(mods) == 3 and mods[0] == "rn" and mods[2] == "f32" and mods[1] in ("f16", "bf16"):
        d, a = _need(args, 2, text)
        conv = "__half_as_ushort(__float2half_rn" if mods[1] == "f16" else \
            "__bfloat16_as_ushort(__float2bfloat16_rn"
        return _set(d, f"{conv}({_f32(a, ops)}))", ops)
    if len(mods) == 3 and mods[0] == "rn" and mods[2] == "f32" and mods[1] in ("f16x2", "bf16x2"):
        d, hi, lo = _need(args, 3, text)  # d = {cvt(a) in the upper half, cvt(b) in the lower}
        conv = "__half_as_ushort(__float2half_rn" if mods[1] == "f16x2" else \
            "__bfloat16_as_ushort(__float2bfloat16_rn"
        return _set(d, f"(((unsigned int){conv}({_f32(hi, ops)}))) << 16) | "
                       f"((unsigned int){conv}({_f32(lo, ops)})))", ops)
    if len(mods) == 2 and mods[0] == "f32" and mods[1] in ("f16", "bf16"):
        d, a = _need(args, 2, text)
        conv = "__half2float(__ushort_as_half" if mods[1] == "f16" else \
            "__bfloat162float(__ushort_as_bfloat16"
        return _set(d, f"{conv}((unsigned short){_value(a, ops)}))", ops, "f")
    if len(mods) == 3 and mods[0] in _TO_INT and mods[2] == "f32" and mods[1] in ("s32", "u32"):
        d, a = _need(args, 2, text)
        fn = f"__float2{'int' if mods[1] == 's32' else 'uint'}_{_TO_INT[mods[0]]}"
        return _set(d, f"{fn}({_f32(a, ops)})", ops)
    if len(mods) == 3 and mods[0] == "rn" and mods[1] == "f32" and mods[2] in ("s32", "u32"):
        d, a = _need(args, 2, text)
        fn = f"__{'int' if mods[2] == 's32' else 'uint'}2float_rn"
        cast = "int" if mods[2] == "s32" else "unsigned int"
        return _set(d, f"{fn}(({cast}){_value(a, ops)})", ops, "f")
    raise _Unknown(f"cvt.{'.'.join(mods)} is not lowered")
