"""The namespaces around the items of a kernel's device-code closure. The closure is a list of
file-scope items (closure.header_nodes); each is written back inside the namespaces that
enclose it in the source (`namespace vllm { ... }`, nested, inline and anonymous ones), so
that `vllm::Fp8KVCacheDataType` or `pwise::granularity` still name something. MSL has C++
namespaces, so the Metal port keeps them as the CUDA slice does."""

from __future__ import annotations

import re

from tree_sitter import Node

from agent.translate.tree import _text


def enclosing(node: Node) -> list[Node]:
    """The ``namespace_definition`` nodes around ``node``, outermost first."""
    out = []
    n = node.parent
    while n is not None:
        if n.type == "namespace_definition":
            out.append(n)
        n = n.parent
    return out[::-1]


def qualified(chain: list[Node], data: bytes) -> str:
    """The namespace ``chain`` as code names it from outside (`a::b`; an anonymous level adds
    nothing, its names are its parent's; "" for none)."""
    return "::".join(_text(n.child_by_field_name("name"), data) for n in chain
                     if n.child_by_field_name("name") is not None)


def _opening(ns: Node, data: bytes) -> str:
    """`namespace a {` as written (`inline namespace v1 {`, `namespace a::b {`)."""
    body = ns.child_by_field_name("body")
    head = data[ns.start_byte:body.start_byte].decode(errors="replace") if body else "namespace "
    return " ".join(head.split()) + " {\n"


def wrapped(parts: list[tuple[Node, str]], data: bytes) -> list[str]:
    """The texts of ``parts`` (file-scope nodes in file order, each with the text to write for
    it), with namespace openings and closings between them where the enclosing namespaces
    change, all closed at the end."""
    out: list[str] = []
    open_: list[Node] = []
    for node, text in parts:
        chain = enclosing(node)
        keep = 0
        while keep < min(len(open_), len(chain)) and \
                open_[keep].start_byte == chain[keep].start_byte:
            keep += 1
        out += [f"}}  // {_opening(ns, data).strip()[:-2]}\n" for ns in reversed(open_[keep:])]
        out += [_opening(ns, data) for ns in chain[keep:]]
        open_ = chain
        out.append(text)
    out += [f"}}  // {_opening(ns, data).strip()[:-2]}\n" for ns in reversed(open_)]
    return out


def kernel_scope(kernel: Node, data: bytes) -> str:
    """``using namespace`` directives for every named namespace around ``kernel``, outermost
    first: code at file scope (MLX's generated kernel, cuda_sim's launch) then finds what the
    kernel's body finds unqualified in them. "" for a kernel at file scope."""
    chain = enclosing(kernel)
    names = [qualified(chain[:i + 1], data) for i in range(len(chain))
             if chain[i].child_by_field_name("name") is not None]
    return "".join(f"using namespace {n};\n" for n in dict.fromkeys(names))



def declared_only(header: str) -> str:
    """``header`` without the ``using namespace N;`` lines for a namespace it does not declare,
    and without repeats: Metal refuses a directive for a namespace it never saw (vLLM's
    rms_norm keeps nothing of `namespace vllm` in the port's header but the kernel, which MLX
    puts in the body)."""
    out, seen = [], set()
    for line in header.split("\n"):
        m = re.fullmatch(r"\s*using\s+namespace\s+([\w:]+)\s*;\s*", line)
        if m:
            name = m[1].split("::")[-1]
            if m[1] in seen or not re.search(rf"\bnamespace\s+(\w+::)*{re.escape(name)}\s*\{{",
                                             header):
                continue
            seen.add(m[1])
        out.append(line)
    return "\n".join(out)
