"""Tree-sitter parsing for every reader of kernel sources and docs: one parser per language,
made once, and the one walk that turns a tree into its leaf tokens (kb/parse.py reads functions
with it, runners/srcrewrite.py rewrites Metal and CUDA source on its tokens).

Metal has no grammar of its own; it is read with the C++ one, its address spaces and ``kernel``
coming out as small error nodes.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import tree_sitter_cpp
import tree_sitter_cuda
import tree_sitter_markdown
import tree_sitter_python
from tree_sitter import Language, Node, Parser

GRAMMARS = {"cuda": tree_sitter_cuda, "metal": tree_sitter_cpp, "cpp": tree_sitter_cpp,
            "python": tree_sitter_python, "markdown": tree_sitter_markdown}
# Literals are one token each: their quotes, escapes and pieces of content are not tokens.
# ("string" is Python's literal; no C++ node has that type.)
LITERALS = frozenset({"string_literal", "raw_string_literal", "char_literal",
                      "system_lib_string", "string"})


@functools.cache
def parser(language: str) -> Parser:
    """The tree-sitter parser of ``language`` (a GRAMMARS key), made once; KeyError for others."""
    return Parser(Language(GRAMMARS[language].language()))


@functools.lru_cache(maxsize=16)
def parse(data: bytes, language: str) -> Node:
    """The root node of ``data`` parsed as ``language``. Trees are never edited, so the last
    few are kept and shared: a port parses its file some 500 times, mostly the same bytes."""
    return parser(language).parse(data).root_node


def walk(node: Node) -> Iterator[Node]:
    """``node`` and every node below it, in source order. A tree's root is walked once and its
    nodes kept (for the last few trees): a port reads its file's whole tree for functions,
    calls and declarations again and again (llama.cpp's norm.cu: about 100 walks of 8400
    nodes, 1.5 s of a 15 s port)."""
    if node.parent is None:
        return iter(_every_node(node))
    return _walk(node)


@functools.lru_cache(maxsize=16)
def _every_node(root: Node) -> tuple[Node, ...]:
    return tuple(_walk(root))


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def leaves(node: Node, whole: frozenset[str] = LITERALS) -> Iterator[Node]:
    """The leaf nodes under ``node`` in source order, each a token: comments and empty nodes
    (tree-sitter's MISSING ones) dropped, a node whose type is in ``whole`` kept as one."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "comment":
            continue
        if n.child_count == 0 or n.type in whole:
            if n.end_byte > n.start_byte:
                yield n
            continue
        stack.extend(reversed(n.children))
