"""kb/rules/rewrites.toml: every entry names a concept rule; bad entries are clear errors."""

import pytest

from kb.concepts import load_rules
from kb.rewrites import RewriteError, load_rewrites


def test_every_rewrite_names_an_existing_rule_and_calls_fill_their_arguments():
    table = load_rewrites()
    rules = {r.id for r in load_rules()}
    entries = [*table.calls.values(), *table.idents.values(), *table.tokens.values(),
               *table.same.values()]
    assert len(entries) > 150 and {e.rule for e in entries} <= rules
    for (_name, n), rw in table.calls.items():
        rw.to.format(*[f"a{i}" for i in range(n)])  # no placeholder beyond the arguments


@pytest.mark.parametrize("text,message", [
    ('[[call]]\nrule = "warp.shfl_down"\nname = "f"\nto = "g({0})"\n', "key `args` missing"),
    ('[[ident]]\nrule = "no.such_rule"\nname = "f"\nto = "g"\n', "no concept rule 'no.such_rule'"),
    ('[[token]]\nrule = "memory.restrict"\nto = ""\n', "[[token]] #1 key `name`"),
])
def test_bad_entries_name_the_entry(tmp_path, text, message):
    f = tmp_path / "rewrites.toml"
    f.write_text(text)
    with pytest.raises(RewriteError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_rewrites(f)
