"""CUDA atomics as Metal ones: the emitter's part (kb/rules/concepts/atomics.toml says what maps
to what, the ``[[atomic]]`` entries of kb/rules/rewrites.toml which function each becomes).

An atomic on an output or a ``__shared__`` int makes it atomic memory (MLX's
``atomic_outputs``, ``threadgroup atomic_int``). An atomic through a pointer cast views the
buffer as the cast's type, as CUDA does: llama.cpp's ``count_equal`` adds an int to the low
word of its int64 output with ``atomicAdd((int *) dst, n)``; Metal does the same through a
``device atomic_int*`` over that plain buffer (cuda-to-metal.md §9). Metal has no 64-bit atomic
add, so a 64-bit atomic without such a cast stays a TODO naming its line.
"""

from __future__ import annotations

from tree_sitter import Node

from agent.translate.helpers import HELPERS
from kb.rewrites import Rewrite

RELAXED = "memory_order_relaxed"
# C spellings of the element types Metal has atomics for (MSL: int, uint, float; float add
# and sub only in device memory, apple-gpu-facts.md F13).
ATOMIC_TYPES = {"int": "atomic_int", "signed": "atomic_int", "signed int": "atomic_int",
                "int32_t": "atomic_int", "unsigned": "atomic_uint",
                "unsigned int": "atomic_uint", "uint": "atomic_uint", "uint32_t": "atomic_uint",
                "float": "atomic_float"}
# 64-bit integers: Metal has no atomic add, exchange or CAS on them (cuda-to-metal.md §9; only
# ulong min/max on some chips, apple-gpu-facts.md F15)
WIDE_INTS = {"long", "long int", "long long", "long long int", "unsigned long",
             "unsigned long int", "unsigned long long", "unsigned long long int", "int64_t",
             "uint64_t", "long long unsigned", "size_t", "ptrdiff_t"}
VIEW_RULE = "atomics.narrow_view"
WIDE_RULE = "atomics.int64_device"


def view_cast(target: Node, data: bytes) -> Node | None:
    """The pointer cast an atomic's target goes through on its way to its buffer:
    ``(int *) dst``, ``&((unsigned *) p)[i]``, ``reinterpret_cast<int*>(p) + i``; None when
    the target addresses the buffer as it is declared."""
    node = target
    while node is not None:
        if _pointer_cast_parts(node, data) is not None:
            return node
        if node.type in ("subscript_expression", "pointer_expression"):
            node = node.child_by_field_name("argument")
        elif node.type == "binary_expression":
            node = node.child_by_field_name("left")
        elif node.type == "parenthesized_expression" and node.named_children:
            node = node.named_children[0]
        else:
            return None
    return None


def _pointer_cast_parts(node: Node, data: bytes) -> tuple[str, Node] | None:
    """(the element type the cast points to, as spelled; its operand) for a C-style or
    ``reinterpret_cast``/``static_cast`` to a pointer; None for any other node."""
    if node.type == "cast_expression":
        ty, operand = node.child_by_field_name("type"), node.child_by_field_name("value")
    elif node.type == "call_expression":
        fn, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
        name = fn.child_by_field_name("name") if fn is not None and \
            fn.type == "template_function" else None
        if name is None or _text(name, data) not in ("reinterpret_cast", "static_cast") or \
                args is None or len(args.named_children) != 1:
            return None
        targs = fn.child_by_field_name("arguments")
        ty = next((c for c in targs.named_children if c.type == "type_descriptor"), None)
        operand = args.named_children[0]
    else:
        return None
    if ty is None or operand is None or not any(
            c.type == "abstract_pointer_declarator" for c in ty.children):
        return None
    base = ty.child_by_field_name("type")
    return (" ".join(_text(base, data).split()) if base is not None else "", operand)


def _text(n: Node, data: bytes) -> str:
    return data[n.start_byte:n.end_byte].decode(errors="replace")


class AtomicRewrites:
    """The emitter's atomic rewrites (mixed into agent.translate.emit.Emitter, whose context
    and helpers they use)."""

    def _atomic_call(self, atomic: Rewrite, node: Node, args: list[Node]) -> str | None:
        """``atomicX(target, ...)`` as Metal's function on the target's atomic address, or
        the call with a TODO naming why there is none. None for a helper-made atomic (CAS)
        whose call does not fit: the generic call handling takes it."""
        name = atomic.name[0]
        if atomic.to in HELPERS and len(args) != 3:
            return None
        address, rule, why = self._atomic_address(atomic, args[0])
        if atomic.to in HELPERS:  # atomicCAS: a helper of the header
            if address is None:
                return None
            self.ctx.helpers.add(atomic.to)
            self._mapped(name, rule)
            return f"{atomic.to}({address}, {self.emit(args[1])}, {self.emit(args[2])})"
        if address is None:
            return self._todo(name, rule, node.child_by_field_name("function"), why) + \
                self.emit(node.child_by_field_name("arguments"))
        self._mapped(name, rule)
        rest = ", ".join(self.emit(a) for a in args[1:])
        return f"{atomic.to}({address}, {rest}, {RELAXED})"

    def _atomic_address(self, atomic: Rewrite, target: Node) -> tuple[str | None, str, str]:
        """(the Metal atomic address of ``target`` or None, the rule that applies, why there
        is no address)."""
        cast = view_cast(target, self.data)
        if cast is not None:
            element, operand = _pointer_cast_parts(cast, self.data)
            memory = "threadgroup" if self._root_name(operand) in self.ctx.shared else "device"
            if element in WIDE_INTS:
                return None, WIDE_RULE, f"a 64-bit atomic ({element}): Metal has none"
            kind = ATOMIC_TYPES.get(element)
            if kind is None or (kind == "atomic_float" and memory == "threadgroup"):
                return None, atomic.rule, f"Metal has no atomic on {memory} {element}"
            view = f"({memory} {kind}*)({self._plain(operand)})"
            self.replaced[(cast.start_byte, cast.end_byte)] = view
            try:
                return self._addr(target), VIEW_RULE, ""
            finally:
                del self.replaced[(cast.start_byte, cast.end_byte)]
        if self._root_name(target) in self.ctx.wide:
            return None, WIDE_RULE, "a 64-bit atomic: Metal has none (view a 32-bit word " \
                "with a cast, as CUDA code does, or add in 32-bit halves with a carry)"
        if not self._atomic_root(target):
            return None, atomic.rule, "not on an output or a threadgroup int array"
        return self._addr(target), atomic.rule, ""

    def _addr(self, target: Node) -> str:
        """An atomic address: ``&y[i]`` stays, ``y + i`` / ``y`` are pointers already."""
        if target.type == "pointer_expression" and self.text(target).startswith("&"):
            inner = target.named_children[-1]
            return "&" + self._plain(inner)
        return self._plain(target)

    def _atomic_root(self, node: Node) -> bool:
        return bool(self.ctx.atomic) and self._root_name(node) in (self.ctx.atomic
                                                                   | self.ctx.atomic_scalars)

    def _atomic_read(self, node: Node) -> bool:
        """A read of an atomic element (``y[i]``, or a threadgroup atomic scalar) that is not
        written, addressed, or handed to an atomic call."""
        if not self.ctx.atomic:
            return False
        if node.type == "subscript_expression":
            if not self._atomic_root(node):
                return False
        elif node.type != "identifier" or self.text(node) not in self.ctx.atomic_scalars:
            return False
        p = node.parent
        if p is None:
            return False
        if p.type == "assignment_expression" and p.child_by_field_name("left") == node:
            return False
        if p.type == "update_expression" or (p.type == "pointer_expression"
                                             and self.text(p).startswith("&")):
            return False
        if p.type == "argument_list" and p.parent is not None:
            fn = p.parent.child_by_field_name("function")
            mapped = {n for n, rw in self.ctx.table.atomics.items() if rw.to}
            if fn is not None and self.text(fn) in mapped \
                    and p.named_children and p.named_children[0] == node:
                return False
        return True

    def _shared_atomic(self, node: Node) -> str:
        """``__shared__ unsigned bins[N]`` used by atomics -> ``threadgroup atomic_uint ...``."""
        ty = " ".join(self.text(c) for c in node.named_children
                      if c.type in ("primitive_type", "sized_type_specifier", "type_identifier"))
        if ATOMIC_TYPES.get(ty) in (None, "atomic_float"):
            return self._todo("atomicAdd", "atomics.threadgroup_float_add", node,
                              f"no threadgroup atomics on {ty}")
        self._mapped("__shared__", "atomics.threadgroup_int")
        decls = [c for c in node.named_children if c.type in ("array_declarator", "identifier")]
        return f"threadgroup {ATOMIC_TYPES[ty]} " + ", ".join(self._plain(d) for d in decls) + \
            ";"
