"""metal_sim's allow-list: its lexer agrees with clang's, it lets honest Metal through (every
expert port of the corpus, the idioms real kernels use) and refuses what it must, and every
name kport's shims declare outside MSL is one a kernel cannot spell."""

import re
import subprocess
from pathlib import Path

import pytest

from runners.cpplex import DIGRAPHS, lex
from runners.metal_sim import allowlist, metal_kernel
from runners.toolchain import find_compiler
from tests.sandbox.attack_corpus import ATTACKS, ROOT

METAL_SOURCES = sorted((ROOT / "corpus" / "cases").glob("*/*.metal"))
TRICKY = {
    "digraphs": "a %: b <% %> <: :> %:%: x\\\ny <::a <:::> <::> q\n%:define K 1\n",
    "splices": "#in\\\nclude <x>\nint ab\\  \nc = 1; // c\\\nstill comment\nint d;\n",
    "literals": "x = \"s\\\"t\" + 'c' + u8\"x\" + L'c' + 1'000 + .5e+3 + 0x1p-3 + 1.f;\n",
    "comments": "a /* b\nc */ #x\n/**/ # define Y 2\n  # /* */ if Y\n",
    "operators": "a<=>b; p->*q; a.*b; x>>=1; y<<=2; a...b; ::c; a##b; %:%:\n",
    "empty_lines": "\n\n\\\n\n#\n  #  \nz\n",
}


def _clang_raw_tokens(path: Path) -> list[tuple[str, str, int, bool]]:
    compiler = find_compiler()
    # -c, not -fsyntax-only: for that zig's driver first builds its libc (20 s and more on a
    # cold cache); the dump replaces the compile, so no object is written either way
    out = subprocess.run([*compiler.command, "-std=c++20", "-c", "-o", str(path) + ".o",
                          "-Xclang", "-dump-raw-tokens", str(path)], capture_output=True,
                         text=True, timeout=120).stderr
    toks, carried = [], False
    for m in re.finditer(r"^(\w+) '(.*?)'\t(\s*\[[^\]]*\])*\s*Loc=<[^:>]+:(\d+):\d+>", out,
                         re.M | re.S):
        kind, text, flags, line = m[1], m[2], m[0], int(m[4])
        if kind == "comment":  # the dump keeps comments: one at a line's start passes it on
            carried = carried or "[StartOfLine]" in flags
            continue
        if kind in ("unknown", "eof"):
            continue
        flags += " [StartOfLine]" if carried else ""
        carried = False
        kind = ("identifier" if kind == "raw_identifier" else "number"
                if kind == "numeric_constant" else "string" if kind.endswith("string_literal")
                else "char" if kind.endswith("char_constant") else "punct")
        toks.append((kind, DIGRAPHS.get(text, text), line, "[StartOfLine]" in flags))
    return toks


def _ours(text: str) -> list[tuple[str, str, int, bool]]:
    toks, problems = lex(text)
    assert not problems, problems
    return [(t.kind, t.text, t.line, t.bol) for t in toks]


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_the_lexer_agrees_with_clangs_raw_lexer_on_tricky_text(name, tmp_path):
    path = tmp_path / f"{name}.cpp"
    path.write_text(TRICKY[name])
    assert _ours(TRICKY[name]) == _clang_raw_tokens(path)


def test_the_lexer_agrees_with_clang_on_the_corpus_and_the_attacks(tmp_path):
    files = METAL_SOURCES + sorted((ATTACKS / "metal").glob("*.metal"))
    # what the lexer refuses (a trigraph, a universal character name) it does not lex on
    files = [f for f in files if not lex(f.read_text())[1]]
    assert len(files) > 90
    for f in files:
        copy = tmp_path / (f.parent.name + "-" + f.stem + ".cpp")  # clang reads .cpp as C++
        text = re.sub(r"@[A-Z]+@", "1", f.read_text())  # the attacks' placeholders, filled
        copy.write_text(text)
        assert _ours(text) == _clang_raw_tokens(copy), f


def test_every_expert_port_of_the_corpus_passes():
    assert len(METAL_SOURCES) >= 43
    for f in METAL_SOURCES:
        body = f.name != "header.metal"  # port.metal: an MLX metal_kernel body
        assert allowlist.source_problems(f.read_text(), f.name, body=body) == [], f


HONEST_HEADER = """#include <metal_stdlib>  // the MSL library
using namespace metal;
#define SQ(v) ((v) * (v))
#define STR(x) #x
#define FIRST(a, ...) (a)
#define UNROLL _Pragma("clang loop unroll(full)")
static constexpr constant float K = 2.0f;
constant int TABLE[4] = {1, 2, 3, 4};
static inline float twice(float v) { return K * v; }
[[maybe_unused]] METAL_FUNC float halve(float v) { return v * 0.5f; }
template <typename T> struct Pair { T a, b; T sum() const { return a + b; } };
inline float apply(float v) { thread float& r = v; r += 1.0f; return r; }
"""
HONEST_BODY = """uint i = thread_position_in_grid.x;
threadgroup __attribute__((aligned(16))) float tile[64];
const device float* __restrict p = x;
#pragma unroll(4 * 1)
for (uint k = 0; k < 4; k++) { tile[i * 4 + k] = 0; }
UNROLL for (uint k = 0; k < 2; k++) { tile[i * 4 + k] += 0; }
threadgroup_barrier(mem_flags::mem_threadgroup);
Pair<float> pr = {p[i], float(TABLE[i % 4])};
if (i < 8) [[likely]] y[i] = twice(SQ(pr.sum())) + halve(FIRST(1.0f, 2.0f)) + apply(0.0f)
    + (STR(z)[0] == 'z' ? 0.0f : 1.0f);
"""


def test_the_idioms_real_kernels_use_pass_every_pass():
    import mlx.core as mx

    assert allowlist.source_problems(HONEST_HEADER, "header.metal") == []
    assert allowlist.source_problems(HONEST_BODY, "source.metal", body=True) == []
    k = metal_kernel("honest", ["x"], ["y"], HONEST_BODY, header=HONEST_HEADER)
    run = k.launch(inputs=[mx.arange(8.0)], grid=(8, 1, 1), threadgroup=(8, 1, 1),
                   output_shapes=[(8,)], output_dtypes=[mx.float32])
    assert run.ok, run.diagnostics + run.findings


REFUSED = {  # body -> the check that refuses it, and in which pass
    "#define CLOSE }\nuint i = 0;\nCLOSE\nvoid f() {": "[structure]",
    "static int calls = 0;": "[storage]",
    "[[clang::optnone]] int v = 0;": "[attribute]",
    "float (*fp)(float) = nullptr;": "[function-pointer]",
    "%:include <metal_stdlib>": "[include]",
    "#define H(x) x ## 1": "[token-pasting]",
    "#if __cplusplus >= 201402L\n#endif": "[reserved-name]",  # its value is C++20's here
    "#if __METAL_VERSION__ >= 320\n#endif": "[reserved-name]",  # a port has one code path
    "#if 1\nint __probe = 0;\n#endif": "[reserved-name]",  # in a group clang reads
    "#if 0\n#elif defined(__x86_64__)\n#endif": "[reserved-name]",  # an #elif clang evaluates
    "#define P(x) _Pragma(#x)\nP(clang optimize off)": "[pragma]",
}


@pytest.mark.parametrize("body", sorted(REFUSED))
def test_what_must_be_refused_is_refused_at_the_users_line(body):
    import mlx.core as mx

    k = metal_kernel("bad", ["x"], ["y"], body + "\ny[0] = x[0];")
    run = k.launch(inputs=[mx.arange(8.0)], grid=(8, 1, 1), threadgroup=(8, 1, 1),
                   output_shapes=[(8,)], output_dtypes=[mx.float32])
    assert not run.compiled
    assert any(REFUSED[body] in d.message and d.file == "source.metal" and d.line >= 1
               for d in run.diagnostics), run.diagnostics


def test_a_header_ending_inside_a_directive_is_refused():
    import mlx.core as mx

    k = metal_kernel("tail", ["x"], ["y"], "y[0] = x[0];", header="#define LAST 1")
    run = k.launch(inputs=[mx.arange(8.0)], grid=(8, 1, 1), threadgroup=(8, 1, 1),
                   output_shapes=[(8,)], output_dtypes=[mx.float32])
    assert not run.compiled and "ends inside a #-line" in str(run.diagnostics)


def test_names_kport_declares_for_kernels_are_reserved():
    """The rename that makes kport's internals unspellable must not erode: no `kp_`, `KP_`
    or namespace `kp` outside the reserved forms in the headers a kernel includes."""
    include = ROOT / "runners" / "simcore" / "include" / "kport"
    loose = []
    for h in sorted(include.rglob("*.h")) + sorted(include.rglob("*.inc")):
        for m in re.finditer(r"(?<![\w])(kp|KP)(_\w+|\b)", h.read_text()):
            loose.append(f"{h.relative_to(include)}: {m[0]}")
    assert loose == []


def test_kernel_and_argument_names_must_be_plain_identifiers():
    for bad in ("__tsan_read4", "x y", "float", "_Pragma", "std"):
        with pytest.raises(ValueError, match="not a name a kernel may use"):
            metal_kernel("k", [bad], ["y"], "y[0] = 0;")


def test_a_kernel_name_follows_mlxs_prefix():
    """MLX declares custom_kernel_<name>: a keyword is a fine name (the README's example is
    `double`), a name that does not continue an identifier is not."""
    import mlx.core as mx

    body = "uint i = thread_position_in_grid.x;\ny[i] = 2 * x[i];"
    k = metal_kernel("double", ["x"], ["y"], body)
    y, = k(inputs=[mx.arange(4.0)], grid=(4, 1, 1), threadgroup=(4, 1, 1),
           output_shapes=[(4,)], output_dtypes=[mx.float32])
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0]
    for bad in ("a-b", "x y", ""):
        with pytest.raises(ValueError, match="not a name a kernel may use"):
            metal_kernel(bad, ["x"], ["y"], "y[0] = 0;")


def test_the_preprocessed_pass_alone_refuses_an_include(monkeypatch):
    """With the source pass off, the second pass still sees what the compiler included."""
    import mlx.core as mx

    monkeypatch.setattr(allowlist, "source_problems", lambda text, file, **kw: [])
    k = metal_kernel("inc", ["x"], ["y"], "%:include <stdlib.h>\ny[0] = x[0];")
    run = k.launch(inputs=[mx.arange(8.0)], grid=(8, 1, 1), threadgroup=(8, 1, 1),
                   output_shapes=[(8,)], output_dtypes=[mx.float32])
    assert not run.compiled
    assert any("[include]" in d.message and "stdlib.h" in d.message and d.line == 1
               for d in run.diagnostics), run.diagnostics


def test_what_a_header_macro_puts_into_mlxs_signature_is_checked():
    import mlx.core as mx

    header = '#define buffer(n) clang::no_sanitize("thread")\n'
    k = metal_kernel("sig", ["x"], ["y"], "y[0] = x[0];", header=header)
    run = k.launch(inputs=[mx.arange(8.0)], grid=(8, 1, 1), threadgroup=(8, 1, 1),
                   output_shapes=[(8,)], output_dtypes=[mx.float32])
    assert not run.compiled and "[attribute]" in str(run.diagnostics), run.diagnostics


def test_the_library_pass_refuses_a_call_out_of_the_kernel():
    """A function declared and never defined is a call out of the library (into the host or
    the C library): the import check on the linked kernel refuses it."""
    import mlx.core as mx

    k = metal_kernel("imp", ["x"], ["y"], "y[0] = float(mystery(int(x[0])));",
                     header="int mystery(int v);\n")
    run = k.launch(inputs=[mx.arange(8.0)], grid=(8, 1, 1), threadgroup=(8, 1, 1),
                   output_shapes=[(8,)], output_dtypes=[mx.float32])
    assert not run.compiled
    assert any("[imports]" in d.message and "mystery" in d.message for d in run.diagnostics), (
        run.diagnostics)
