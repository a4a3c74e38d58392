"""In-place arguments (``inout``): the emitter's part. MLX passes an in-place CUDA array as
an input ``x`` and a fresh output ``x_out``; every write goes to the output, and a read takes
the input before the kernel's first write and, after it, the output only where this thread may
have written the element (the same index written before, or a write kport cannot index), the
input elsewhere (agent/translate/analyze.py finds the first write)."""

from __future__ import annotations

from tree_sitter import Node

from agent.translate.tree import _walk


class InPlace:
    """Mixed into the Emitter: needs ``self.ctx.inout`` (name -> first write's end byte),
    ``self.text``, ``self.emit``, ``self._root_name`` and ``self.writes_seen`` (a dict it
    fills: where each in-place name is written, per tree)."""

    def _plain_out(self, left: Node) -> str:
        saved = self.ctx.inout
        self.ctx.inout = {k: -1 for k in saved}  # every use of an inout name is the output
        try:
            return self.emit(left)
        finally:
            self.ctx.inout = saved

    def _inout_name(self, node: Node) -> str | None:
        """An in-place argument read: its input before the first write; after it, its output
        where this thread may have written the element (`x[i]` read after `x[i] = ...`, or
        after a write kport cannot index), its input elsewhere (causal-conv1d's state shift
        reads elements the thread has not written yet: the output holds nothing there)."""
        name = self.text(node)
        first = self.ctx.inout.get(name)
        if first is None:
            return None
        if node.start_byte < first:
            return name
        sub = node.parent
        if sub is not None and sub.type == "subscript_expression" and \
                sub.child_by_field_name("argument") == node and first >= 0:
            index = _index_text(self.text(sub), name)
            if not any(end <= node.start_byte and at in (None, index)
                       for end, at in self._writes_of(name, node)):
                return name
        return f"{name}_out"

    def _writes_of(self, name: str, node: Node) -> list[tuple[int, str | None]]:
        """Where ``name``'s data is written in the tree of ``node``: (end byte, the index
        text, or None for a write kport cannot index: `*p =`, a call writing through it)."""
        root = node
        while root.parent is not None:
            root = root.parent
        key = (name, root.start_byte, root.end_byte)
        cache = self.writes_seen
        if key not in cache:
            found = []
            for n in _walk(root):
                target = n.child_by_field_name("left") or n.child_by_field_name("argument") \
                    if n.type in ("assignment_expression", "update_expression") else None
                if target is not None and self._root_name(target) == name:
                    found.append((n.end_byte, _index_text(self.text(target), name)
                                  if target.type == "subscript_expression" else None))
                elif n.type == "call_expression" and any(
                        a.type != "subscript_expression" and self._root_name(a) == name
                        for a in (n.child_by_field_name("arguments") or n).named_children):
                    found.append((n.end_byte, None))  # the pointer handed to a function
            cache[key] = found
        return cache[key]


def _index_text(subscript: str, name: str) -> str:
    """The index of ``name[...]`` as written, without spaces (`x[i + 1]` -> `[i+1]`)."""
    return "".join(subscript.strip()[len(name):].split())


def pointer_locals(body: Node, data: bytes) -> set[str]:
    """The local pointer variables declared in ``body`` (``float *x = ...``, ``T *p;``):
    ``x += 512`` moves such a pointer, which neither reads nor writes the array it views
    (causal-conv1d walks ``x`` and ``out`` along a row in chunks)."""
    out = set()
    for n in _walk(body):
        if n.type == "pointer_declarator" and n.parent is not None and \
                n.parent.type in ("declaration", "init_declarator"):
            leaf = n.child_by_field_name("declarator")
            if leaf is not None and leaf.type == "identifier":
                out.add(data[leaf.start_byte:leaf.end_byte].decode())
    return out
