"""Arguments a helper takes by reference (``float&``, ``T (&items)[N]``): Metal binds a
``thread`` reference to neither a vector's element nor device memory, so such an argument is
passed as a temporary and written back (``{ auto kp_ref0 = v.x; f(kp_ref0); v.x = kp_ref0; }``).
A CUB ``TempStorage&`` is a threadgroup reference and takes the caller's shared memory itself
(analyze.py leaves those out of ``ref_params``)."""

from __future__ import annotations

from tree_sitter import Node


def declares_reference(node: Node) -> bool:
    """Is this parameter a reference: ``float& v``, ``const int &i``, or a reference to an
    array, ``const float (&vals)[N]``?"""
    for c in node.children:
        d = c
        while d is not None and d.type in ("array_declarator", "parenthesized_declarator"):
            d = d.child_by_field_name("declarator") or (
                d.named_children[0] if d.named_children else None)
        if d is not None and d.type == "reference_declarator":
            return True
    return False


class RefArguments:
    """Mixed into the Emitter: needs ``self.ctx``, ``self.text``, ``self.emit``,
    ``self._args``, ``self._read_version``, ``self._plain_out`` and ``self._root_name``."""

    def _ref_temps(self, call: Node) -> str | None:
        """``f(v.x, y[i]);`` with f taking ``float&``: Metal binds no reference to a vector
        element, and a thread reference not to device memory, so pass temporaries and write
        them back: ``{ auto kp0 = v.x; ...; f(kp0, ...); v.x = kp0; }``."""
        fn = call.child_by_field_name("function")
        if fn is None:
            return None
        refs = self.ctx.ref_params.get(self.text(fn).split("<")[0], set())
        args = self._args(call)
        picked = [i for i in sorted(refs) if i < len(args) and self._needs_temp(args[i])]
        if not picked:
            return None
        pre, post, parts = [], [], []
        for i, a in enumerate(args):
            if i in picked:
                tmp = f"kp_ref{i}"
                pre.append(f"auto {tmp} = {self._read_version(a)};")
                post.append(f"{self._plain_out(a)} = {tmp};")
                parts.append(tmp)
            else:
                parts.append(self.emit(a))
        base = self.text(fn).split("<")[0]
        extra = self.ctx.extra_params.get(base, [])
        return (f"{{ {' '.join(pre)} {self.emit(fn)}({', '.join(parts + extra)}); "
                f"{' '.join(post)} }}")

    def _needs_temp(self, arg: Node) -> bool:
        if arg.type == "field_expression":
            f = arg.child_by_field_name("field")
            if f is not None and self.text(f) in ("x", "y", "z", "w", "r", "g", "b", "a"):
                return True
        root = self._root_name(arg)
        return root in (set(self.ctx.inout) | self.ctx.device_ptrs | self.ctx.shared)
