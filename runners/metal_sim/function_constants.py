"""Function constants of a .metal library: ``constant T name [[function_constant(i)]];``.

Metal gives a function constant its value when the pipeline is made
(``MTLFunctionConstantValues``, by index or by name), and ``is_function_constant_defined(name)``
says whether one was given. metal_sim reads each declaration written on a line of its own with a
scalar type (llama.cpp's ggml-metal declares them so) and turns it into a macro that asks a
table the simulator writes from ``MetalLibrary.function(name, constants=...)``: a value given by
name, else one given by the constant's index (an expression of the source, evaluated where it
is used), else the launch stops with a finding at the line that read it. ``build()`` compiles
without values, as Apple's compiler compiles the library before any pipeline exists.

Not modelled (a declaration in another form keeps failing to compile, which is safe): vector
function constants, a function constant with an initializer (``= other``), and
``[[function_constant(name)]]`` on a kernel's arguments.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

SCALARS = ("bool", "char", "uchar", "short", "ushort", "int", "uint", "half", "float",
           "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t")
_DECLARATION = re.compile(
    r"^[ \t]*constant[ \t]+(?P<type>" + "|".join(SCALARS) + r")[ \t]+(?P<name>[A-Za-z]\w*)"
    r"[ \t]*\[\[[ \t]*function_constant[ \t]*\((?P<index>[^\]\n]+)\)[ \t]*\]\][ \t]*;"
    r"[ \t]*(?://[^\n\\]*)?$", re.M)


@dataclass(frozen=True)
class FunctionConstant:
    name: str
    type: str
    index: str  # as written: `FC_BIN + 0`
    ordinal: int  # position among the declarations


def declared(source: str) -> list[FunctionConstant]:
    return [FunctionConstant(m["name"], m["type"], m["index"].strip(), k)
            for k, m in enumerate(_DECLARATION.finditer(source))]


def rewrite(code: str) -> str:
    """``code`` with each declaration replaced, on its own line, by a macro that reads the
    value the launch gives; ``is_function_constant_defined(name)`` of each asks the table."""
    found = {c.name: c for c in declared(code)}
    ordinals = itertools.count()

    def macro(m: re.Match) -> str:
        k = next(ordinals)
        return (f"#define {m['name']} (({m['type']}) __kp_function_constant("
                f"({m['index'].strip()}), {k}, __LINE__))")

    code = _DECLARATION.sub(macro, code)
    if not found:
        return code
    names = "|".join(map(re.escape, found))
    return re.sub(r"\bis_function_constant_defined\s*\(\s*(" + names + r")\s*\)",
                  lambda m: f"__kp_function_constant_defined(({found[m[1]].index}), "
                            f"{found[m[1]].ordinal})", code)


def _value(v) -> str:
    if isinstance(v, bool):
        return "1.0" if v else "0.0"
    if isinstance(v, int):
        return f"{float(v)!r}"
    return repr(float(v))


def table(source: str, values: dict | None) -> str:
    """The C++ that answers the macros ``rewrite`` writes, for the ``values`` one launch gives
    (name or index -> value); placed before the source. Raises ValueError for a name the
    source does not declare or a value that is not a finite number or bool."""
    consts = declared(source)
    by_name = {c.name: c for c in consts}
    named, indexed = {}, {}
    for key, v in (values or {}).items():
        if not isinstance(v, (bool, int, float)) or not math.isfinite(float(v)):
            raise ValueError(f"function constant {key!r}: {v!r} is not a number or a bool")
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise ValueError(f"function constant key {key!r}: give a name or an index")
        if isinstance(key, str):
            if key not in by_name:
                known = ", ".join(sorted(by_name)) or "none"
                raise ValueError(f"function constant {key!r} is not declared in the library "
                                 f"(it declares: {known})")
            named[by_name[key].ordinal] = _value(v)
        else:
            indexed[int(key)] = _value(v)
    by_ordinal = "".join(f"    case {k}: return {v};\n" for k, v in sorted(named.items()))
    by_index = "".join(f"    case {k}: return {v};\n" for k, v in sorted(indexed.items()))
    return (
        "static inline double __kp_function_constant_lookup(long __kp_i, int __kp_o, "
        "bool* __kp_found) {\n  *__kp_found = true;\n"
        f"  switch (__kp_o) {{\n{by_ordinal}    default: break;\n  }}\n"
        f"  switch (__kp_i) {{\n{by_index}    default: break;\n  }}\n"
        "  *__kp_found = false;\n  return 0;\n}\n"
        "static inline bool __kp_function_constant_defined(long __kp_i, int __kp_o) {\n"
        "  bool __kp_found;\n  __kp_function_constant_lookup(__kp_i, __kp_o, &__kp_found);\n"
        "  return __kp_found;\n}\n"
        "static inline double __kp_function_constant(long __kp_i, int __kp_o, unsigned line) {\n"
        "  bool __kp_found;\n"
        "  double __kp_v = __kp_function_constant_lookup(__kp_i, __kp_o, &__kp_found);\n"
        "  if (!__kp_found) __kp_fatal(__KP_F_INVALID, line, \"a function constant read here "
        "has no value: give it with MetalLibrary.function(name, constants={...})\");\n"
        "  return __kp_v;\n}\n")
