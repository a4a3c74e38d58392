"""MSL's restrictions on C++ that clang's C++ does not have (issue 14), read from the candidate's
preprocessed tokens (runners/metal_sim/expanded.py runs them), so a macro hides nothing.

Each rule cites the section of the Metal Shading Language Specification (numbered as in MSL
3.2, 2024-06-06) that states it; docs/msl-rules.md lists them with their conformance snippets.
Apple's exact wording of these errors is not known (no public log): the messages say what MSL
forbids and where the spec says so.
"""

from __future__ import annotations

from runners.cpplex import Token
from runners.metal_sim.allowlist import Problem

# MSL 3.2 §2.1: "Metal does not support the double, long long, unsigned long long, and long
# double data types."
_NO_DOUBLE = ("MSL has no `double` or `long double` (MSL 3.2 §2.1; Apple GPUs have no fp64): "
              "use float")
_NO_LONG_LONG = ("MSL has no `long long` (MSL 3.2 §2.1): its 64-bit integers are `long` and "
                 "`ulong` (int64_t, uint64_t)")
# MSL 3.2 §6.15: atomic read-modify-write takes memory_order_relaxed only (seq_cst is for
# atomic_thread_fence, from MSL 3.2). Whether atomic_load/store accept other orders is not
# established, so only read-modify-write calls are checked.
_RMW = ("atomic_fetch_add_explicit", "atomic_fetch_sub_explicit", "atomic_fetch_and_explicit",
        "atomic_fetch_or_explicit", "atomic_fetch_xor_explicit", "atomic_fetch_min_explicit",
        "atomic_fetch_max_explicit", "atomic_exchange_explicit",
        "atomic_compare_exchange_weak_explicit", "atomic_compare_exchange_strong_explicit")
_STRONG_ORDERS = {"memory_order_seq_cst", "memory_order_acquire", "memory_order_release",
                  "memory_order_acq_rel", "memory_order_consume"}
# a `[` after one of these starts an expression, so it opens a lambda's capture list
_EXPRESSION_WORDS = {"return", "co_return", "case", "throw"}
# a `noexcept` after one of these is a function's exception specification, which MSL accepts
_SPECIFIER_AFTER = {")", "const", "volatile", "&", "&&", "]]", "]"}


def problems(toks: list[Token], file: str, *, whole_file: bool) -> list[Problem]:
    """Every MSL restriction ``toks`` (one candidate file, preprocessed) breaks, as
    allowlist.Problem records. ``whole_file``: a .metal library (its kernels are checked for
    overloads and kernel-argument address spaces), not an MLX header or body."""
    out = []

    def add(t: Token, check: str, message: str) -> None:
        out.append(Problem(file, t.line, check, message))

    for k, t in enumerate(toks):
        prev = toks[k - 1] if k else None
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        if t.kind == "identifier":
            if t.text == "double":
                add(t, "type", _NO_DOUBLE)
            elif t.text == "long" and nxt is not None and nxt.text == "long" and not (
                    prev is not None and prev.text == "long"):
                add(t, "type", _NO_LONG_LONG)
            elif t.text == "noexcept" and nxt is not None and nxt.text == "(" and (
                    prev is None or prev.text not in _SPECIFIER_AFTER):
                add(t, "cpp-restriction", "the noexcept operator is not supported in MSL "
                    "(MSL 3.2 §1.5.4); a noexcept specifier on a function is")
            elif t.text == "main" and nxt is not None and nxt.text == "(" and prev is not None \
                    and (prev.kind == "identifier" and prev.text not in _EXPRESSION_WORDS
                         or prev.text in ("]]", ">", "*", "&")):
                add(t, "cpp-restriction", "a function may not be named `main` in MSL "
                    "(MSL 3.2 §1.5.4)")
            elif t.text in _RMW and nxt is not None and nxt.text == "(":
                order = _strong_order(toks, k + 1)
                if order is not None:
                    add(order, "atomics", f"`{order.text}` in `{t.text}`: MSL's atomic "
                        "read-modify-write functions take memory_order_relaxed only (MSL 3.2 "
                        "§6.15); order with atomic_thread_fence or a barrier instead")
        elif t.text == "[" and _opens_lambda(toks, k):
            add(t, "cpp-restriction", "lambda expressions are not supported before MSL 4.0 "
                "(MSL 3.2 §1.5.4), and MLX builds for MSL 3.1 on macOS 14: write a helper "
                "function")
    if whole_file:
        out += [Problem(file, line, check, msg) for line, check, msg in _kernel_problems(toks)]
    return out


def _opens_lambda(toks: list[Token], k: int) -> bool:
    """Whether the `[` at toks[k] opens a lambda's capture list (not a subscript, an array
    declarator, an attribute's `[[` or `operator[]`)."""
    if k + 1 < len(toks) and toks[k + 1].text == "[":
        return False  # `[[attribute]]`
    if not k:
        return False
    prev = toks[k - 1]
    if prev.text == "[":
        return False  # the second `[` of `[[`
    if prev.kind == "identifier":
        return prev.text in _EXPRESSION_WORDS
    if prev.text in ("{", ",") and _designator(toks, k):
        return False
    return prev.kind == "punct" and prev.text not in (")", "]", ">")


def _designator(toks: list[Token], k: int) -> bool:
    """Whether the `[` at toks[k] opens an array designator in a braced initializer:
    `{ [2] = x }`, or GNU's range `{ [0 ... N-1] = x }` (llama.cpp's flash attention writes
    it; clang, Apple's compiler among them, accepts both in C++)."""
    depth = 0
    for j in range(k, len(toks)):
        depth += toks[j].text == "["
        depth -= toks[j].text == "]"
        if depth == 0:
            return j + 1 < len(toks) and toks[j + 1].text in ("=", ".", "[")
    return False


def _strong_order(toks: list[Token], open_: int) -> Token | None:
    """The first order other than relaxed among the call arguments opened at toks[open_]."""
    depth = 0
    for j in range(open_, len(toks)):
        depth += toks[j].text == "("
        depth -= toks[j].text == ")"
        if depth == 0:
            return None
        if toks[j].text in _STRONG_ORDERS:
            return toks[j]
    return None


def _kernel_problems(toks: list[Token]) -> list[tuple[int, str, str]]:
    """(line, check, message) for kernels declared twice under one name (MSL 3.2 §1.5.1:
    kernel functions cannot be overloaded) and kernel arguments in the thread address space
    (MSL 3.2 §4: a kernel's pointer and reference arguments are device, constant or
    threadgroup memory)."""
    out, seen = [], set()
    for k, t in enumerate(toks):
        if t.text != "kernel" or k + 3 >= len(toks) or toks[k + 1].text != "void":
            continue
        name, open_ = toks[k + 2], k + 3
        if name.kind != "identifier" or toks[open_].text != "(":
            continue
        if name.text in seen:
            out.append((name.line, "kernel", f"kernel `{name.text}` is declared twice: MSL "
                        "kernel functions cannot be overloaded (MSL 3.2 §1.5.1); give each a "
                        "name of its own"))
        seen.add(name.text)
        depth, start = 0, open_ + 1
        for j in range(open_, len(toks)):
            depth += toks[j].text in "(["
            depth -= toks[j].text in ")]"
            if (depth == 1 and toks[j].text == ",") or depth == 0:
                param = toks[start:j]
                space = next((x for x in param if x.text == "thread"), None)
                if space is not None and any(x.text in ("*", "&") for x in param):
                    out.append((space.line, "address-space", "a kernel's pointer and reference "
                                "arguments must be in device, constant or threadgroup memory, "
                                "not thread (MSL 3.2 §4)"))
                start = j + 1
            if depth == 0:
                break
    return out
