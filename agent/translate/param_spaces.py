"""The memory a helper's local pointer points into when it is made from the helper's own
pointer parameters: ``const scalar_t* cos_ptr = cache_ptr;`` in vLLM's
``apply_rotary_embedding`` and ``reinterpret_cast<uint4*>(dst)`` in DeepSpeed's
``store_global`` take the space the parameter was given (device, threadgroup or thread), and
its const where the helper never writes through it (mamba's ``load_input``).
Parameters shadow the kernel's names, so they are asked first."""

from __future__ import annotations

from tree_sitter import Node

from agent.translate.analyze import PARAMETER_NODES
from agent.translate.tree import _walk


class HelperParamSpaces:
    """Mixed into the Emitter: needs ``self.in_kernel``, ``self.text``, ``self.ctx`` and
    ``self._space_for`` / ``self._enclosing_fn``."""

    def _helper_param_space(self, node: Node, names: set[str]) -> str | None:
        """The space of the enclosing helper's pointer parameters among ``names`` when they
        agree (``const`` dropped: the declaration keeps its own); None in the kernel, when no
        parameter is named, or for an in-place parameter (a read and a write twin)."""
        if self.in_kernel:
            return None
        fn = node.parent
        while fn is not None and fn.type != "function_definition":
            fn = fn.parent
        decl = next((n for n in _walk(fn.child_by_field_name("declarator")) if
                     n.type == "function_declarator"), None) if fn is not None else None
        plist = decl.child_by_field_name("parameters") if decl is not None else None
        if plist is None:
            return None
        split = self.ctx.split_params.get(self._enclosing_fn(node) or "", set())
        read = self.ctx.read_params.get(self._enclosing_fn(node, bare=True) or "", set())
        params = [p for p in plist.named_children if p.type in PARAMETER_NODES]
        spaces, written = set(), False
        for i, p in enumerate(params):
            ids = [n for n in _walk(p.child_by_field_name("declarator") or p)
                   if n.type == "identifier"]
            if not ids or self.text(ids[-1]) not in names or \
                    not any(n.type == "pointer_declarator" for n in _walk(p)):
                continue
            if i in split:
                return None
            spaces.add((self._space_for(p) or "").removeprefix("const ").strip())
            written |= i not in read
        if len(spaces) != 1 or "" in spaces:
            return None
        space = spaces.pop()
        # a view of parameters the helper never writes (`reinterpret_cast<vec_t*>(u)` of a
        # `const device` u) is const too: Metal refuses a cast that drops const
        return f"const {space}" if space == "device" and not written and \
            "const" not in self.text(node).split() else space
