"""kb/rules/rewrites.toml: every entry names a concept rule; bad entries are clear errors."""

import pytest

from kb.concepts import load_rules
from kb.rewrites import RewriteError, load_rewrites


def test_every_rewrite_names_an_existing_rule_and_calls_fill_their_arguments():
    table = load_rewrites()
    rules = {r.id for r in load_rules()}
    entries = [*table.calls.values(), *table.idents.values(), *table.tokens.values(),
               *table.same.values(), *table.atomics.values(), *table.scoped.values()]
    assert len(entries) > 150 and {e.rule for e in entries} <= rules
    for (_name, n), rw in table.calls.items():
        rw.to.format(*[f"a{i}" for i in range(n)])  # no placeholder beyond the arguments


@pytest.mark.parametrize("text,message", [
    ('[[call]]\nrule = "warp.shfl_down"\nname = "f"\nto = "g({0})"\n', "key `args` missing"),
    ('[[ident]]\nrule = "no.such_rule"\nname = "f"\nto = "g"\n', "no concept rule 'no.such_rule'"),
    ('[[token]]\nrule = "memory.restrict"\nto = ""\n', "[[token]] #1 key `name`"),
    ('[[scoped]]\nrule = "types.std_library"\nname = "min"\nto = "metal"\n',
     "[[scoped]] #1: each name is NAMESPACE::MEMBER"),
])
def test_bad_entries_name_the_entry(tmp_path, text, message):
    f = tmp_path / "rewrites.toml"
    f.write_text(text)
    with pytest.raises(RewriteError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_rewrites(f)


ATOMICS = sorted(n for n, rw in load_rewrites().atomics.items())


@pytest.mark.parametrize("name", ATOMICS)
def test_each_atomic_spelling_translates_as_its_entry_says(name):
    """Golden test of each [[atomic]] entry: the call on an output becomes the entry's Metal
    function with memory_order_relaxed (a helper for the strong CAS), or a KPORT-TODO naming
    the entry's rule when it has no `to`; its compound assignment on a threadgroup atomic
    becomes the same function."""
    from agent.translate import translate_kernel

    rw = load_rewrites().atomics[name]
    args = "&out[0], 1, 2" if name == "atomicCAS" else "&out[0], 1" if name not in (
        "atomicInc", "atomicDec") else "(unsigned*)&out[0], 5u"
    src = f"__global__ void k(int* out) {{ {name}({args}); }}\n"
    tr = translate_kernel(src, "k", grid=[1], block=[1])
    if not rw.to:
        assert any(t.rule == rw.rule for t in tr.todos), tr.todos
        return
    if name == "atomicCAS":
        assert f"{rw.to}(&out[0], 1, 2)" in tr.body and rw.to in tr.header
    else:
        assert f"{rw.to}(&out[0], 1, memory_order_relaxed)" in tr.body, tr.body
    if rw.compound:
        src = ("__global__ void k(int* out) { __shared__ int total; if (threadIdx.x == 0) "
               f"total = 0; __syncthreads(); atomicAdd(&total, 1); total {rw.compound} 3; "
               "__syncthreads(); out[0] = total; }\n")
        tr = translate_kernel(src, "k", grid=[1], block=[32])
        assert f"{rw.to}(&total, 3, memory_order_relaxed)" in tr.body, tr.body


SCOPED = sorted(load_rewrites().scoped)


@pytest.mark.parametrize("name", SCOPED)
def test_each_scoped_spelling_translates_as_its_entry_says(name):
    """Golden test of each [[scoped]] entry: `std::member` becomes `metal::member` (MSL has no
    std), mapped and counted; a std member with no entry is a counted TODO instead."""
    from agent.translate import translate_kernel

    rw = load_rewrites().scoped[name]
    member = name.split("::")[1]
    src = f"__global__ void k(int* out) {{ using K = {name}<int>; out[0] = 1; }}\n"
    tr = translate_kernel(src, "k", grid=[1], block=[1])
    assert f"using K = {rw.to}::{member}<int>;" in tr.body and not tr.todos, tr.body
    assert tr.mapped[name] == 1


def test_a_std_member_without_an_entry_is_a_todo():
    from agent.translate import translate_kernel

    src = "__global__ void k(int* out) { std::vector<int> v; out[0] = 1; }\n"
    tr = translate_kernel(src, "k", grid=[1], block=[1])
    assert [(t.rule, t.construct) for t in tr.todos] == [("types.std_library", "std::vector")]
