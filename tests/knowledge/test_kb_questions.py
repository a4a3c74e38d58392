"""The question benchmark (evals/bench_kb_questions.py): its data is well formed, and hybrid
search over a real store answers the held-out half. Also the search behaviour it was tuned
with: one ranking across collections, stemmed BM25 terms, question stopwords, the prose
channel."""

import json

import numpy as np
import pytest

from evals.bench_kb_questions import (
    LATER_QUESTIONS,
    QuestionFileError,
    knowledge_store,
    known_rule_ids,
    load_questions,
    recall,
    split_of,
)
from kb.answers import answer
from kb.chunks import (
    Chunk,
    arch_chunks,
    asked_lines,
    asked_of,
    fix_chunks,
    prose_of,
    rule_chunks,
)
from kb.concepts import RuleError, also_called, load_glossary, load_rules
from kb.search import (
    QUERY_CODE_TOKENS,
    BM25Cache,
    Hit,
    code_words,
    query_terms,
    query_view,
    search,
)
from kb.store import KBStore


def test_the_question_file_is_well_formed():
    questions = load_questions()
    assert len(questions) >= 150
    assert len({q.text for q in questions}) == len(questions)
    known = known_rule_ids()
    for q in questions:
        assert q.source.startswith("https://"), q.text
        assert q.rules and set(q.rules) <= known, q.text
        assert q.split == split_of(q.text)
    for split in ("tune", "held_out"):
        assert sum(q.split == split for q in questions) >= 70


@pytest.mark.parametrize("path, earlier", [(path, LATER_QUESTIONS[:i])
                                           for i, path in enumerate(LATER_QUESTIONS)])
def test_the_fresh_questions_come_from_threads_the_tuned_set_does_not_cite(path, earlier):
    """A later set measured search once on questions no change had been fitted to: none of its
    threads (nor texts) may be one an earlier file cites, and it is well formed like the main
    file."""
    fresh = load_questions(path)
    assert len(fresh) >= 25
    for other in [load_questions(), *map(load_questions, earlier)]:
        assert not {q.source for q in fresh} & {q.source for q in other}
        assert not {q.text for q in fresh} & {q.text for q in other}
    assert len({q.source for q in fresh}) == len(fresh)
    for q in fresh:  # a public thread: GitHub's, or a forum's (the issue asks for both; some
        # mirrors of Stack Overflow serve plain http)
        assert q.source.startswith(("https://", "http://")), q.text
        assert q.split == split_of(q.text)


GOOD = '''[[question]]
question = "Is there double precision on Apple GPUs?"
source = "https://example.org/t/1"
rules = ["F11"]
split = "{split}"
'''


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.replace('source = "https://example.org/t/1"\n', ""), "give both `question` "
     "and `source`"),
    (lambda s: s.replace('["F11"]', '["fp64.no_such_rule"]'), "unknown rule id "
     "'fp64.no_such_rule'"),
    (lambda s: s.replace('["F11"]', "[]"), "`rules` must list"),
    (lambda s: s.replace("split = ", 'split = "x"\nsplit_was = '), "`split` must be"),
    (lambda s: s + "\n" + s, "question 2: duplicate question"),
])
def test_a_bad_question_names_the_question_and_the_key(tmp_path, edit, message):
    text = GOOD.format(split=split_of("Is there double precision on Apple GPUs?"))
    path = tmp_path / "q.toml"
    path.write_text(text)
    assert [q.rules for q in load_questions(path)] == [("F11",)]
    path.write_text(edit(text))
    with pytest.raises(QuestionFileError, match=message) as err:
        load_questions(path)
    assert str(path) in str(err.value)


def test_a_kept_workdir_store_measures_todays_rules(tmp_path, capfd):
    """A --workdir kept from an earlier run: its store lacks a rule written since (here the first
    concept rule) and the benchmark adds it before measuring, saying so on stderr, instead of
    scoring the rules of the store's first build."""
    chunks = rule_chunks() + arch_chunks() + fix_chunks()
    KBStore(tmp_path / "kb", create=True).add(chunks[1:])
    store = knowledge_store(tmp_path / "kb")
    assert chunks[0].id in store.documents("rules")["ids"]
    assert "refreshed kport's rules" in capfd.readouterr().err
    knowledge_store(tmp_path / "kb")  # current now: nothing to say
    assert "refreshed" not in capfd.readouterr().err


def test_bm25_terms_are_stemmed_and_questions_drop_stopwords():
    assert code_words("threads spilling atomically padded sizes") == [
        "thread", "spill", "atomic", "pad", "size"]
    assert code_words("simd_shuffle_down") == ["simd_shuffle_down", "simd", "shuffle", "down"]
    text, _ = query_terms(query_view("How do I use the threadgroup barriers?"))
    assert text == ["threadgroup", "barrier"]
    code = "__global__ void k(float* y) { for (int i = 0; i < 4; ++i) y[threadIdx.x] = i; }"
    assert "for" in query_terms(query_view(code))[0]  # code keeps every term


def _store(tmp_path) -> KBStore:
    store = KBStore(tmp_path / "kb", create=True)
    store.add([
        Chunk("rules", f"Threadgroup barrier rule {i}",
              f"threadgroup_barrier(mem_flags::mem_threadgroup) stops every thread in the "
              f"threadgroup until each one arrives ({i})",
              {"source": "t", "rule_id": f"sync.r{i}", "language": "rule"})
        for i in range(3)] + [
        Chunk("arch", "Apple GPU memory bandwidth",
              "An M2 Max has 400 GB/s of memory bandwidth.",
              {"source": "t", "arch_id": "F99", "language": "arch"})])
    return store


def test_collections_share_one_ranking(tmp_path):
    """A weak match in a small collection no longer takes a top place because it leads its own
    collection (it used to rank first): all three barrier rules rank above the bandwidth fact."""
    hits = search(_store(tmp_path), "how to synchronize all threads of a workgroup",
                  kinds=["rules", "arch"], k=4, cache_root=tmp_path / "cache")
    assert [h.kind for h in hits[:3]] == ["rules"] * 3
    assert "names" not in hits[0].ranks  # a question's names channel looks at kernels only


def test_the_prose_of_a_rule_leaves_out_its_code():
    rule = next(r for r in load_rules() if r.id == "warp.shfl_down")
    chunk = next(c for c in rule_chunks() if c.metadata["rule_id"] == rule.id)
    prose = prose_of(chunk.title, chunk.text)
    assert prose.startswith(rule.title) and prose.count(rule.title) == 1
    assert rule.notes in prose and all(p in prose for p in rule.pitfalls)
    assert "CUDA: " not in prose and "Metal: " not in prose
    assert rule.example.cuda.strip() not in prose and rule.example.metal.strip() not in prose
    fact = "An M2 Max has 400 GB/s of memory bandwidth."
    assert prose_of("bandwidth", fact) == f"bandwidth\n{fact}"  # a fact is all prose


def test_a_question_reads_the_prose_channel_and_code_does_not(tmp_path):
    store = _store(tmp_path)
    hits = search(store, "does every thread wait until each one arrives", kinds=["rules"],
                  k=3, cache_root=tmp_path / "cache")
    assert all("prose" in h.ranks for h in hits)
    code = "__global__ void k(float* y) { __syncthreads(); y[threadIdx.x] = 1.0f; }"
    hits = search(store, code, kinds=["rules"], k=3, cache_root=tmp_path / "cache")
    assert hits and not any("prose" in h.ranks for h in hits)


def _asked_store(tmp_path) -> KBStore:
    """Three rules in the same words, one of them also carrying how its question is asked."""
    store = KBStore(tmp_path / "kb", create=True)
    asked = asked_lines(["my kernel hangs forever when only some threads reach the wait",
                         "deadlock   after an early return"])
    notes = " ".join(["threadgroup_barrier stops every thread of the threadgroup until each "
                      "one arrives, and makes its threadgroup memory writes visible."] * 12)
    store.add([Chunk("rules", f"Threadgroup barrier rule {i}", "\n".join([
        f"Threadgroup barrier rule {i}", f"{notes} ({i})",  # past the model's 256 tokens:
        *(asked if i == 1 else [])]), {"source": "t", "rule_id": f"sync.r{i}",  # only the
                                      "language": "rule"}) for i in range(3)])  # mix sees them
    return store


def test_a_question_asked_as_a_rule_says_finds_that_rule(tmp_path):
    """For a text question the dense channel reads a chunk's vector with its asked phrasings
    mixed in: a question in the words of a symptom ranks the rule carrying that symptom first,
    though the three rules' texts match alike. A CUDA-code query compares with the chunk's own
    vector, and BM25 does not read the phrasings."""
    store = _asked_store(tmp_path)
    hits = search(store, "why does my kernel hang when some threads returned early",
                  kinds=["rules"], k=3, method="dense", cache_root=tmp_path / "cache")
    assert hits[0].metadata["rule_id"] == "sync.r1", [h.metadata["rule_id"] for h in hits]
    assert hits[0].score > hits[1].score + 0.05  # the texts alone score within 0.01
    code = "__global__ void k(float* y) { __syncthreads(); y[threadIdx.x] = 1.0f; }"
    hits = search(store, code, kinds=["rules"], k=3, method="dense",
                  cache_root=tmp_path / "cache")
    got = store.documents("rules", include_embeddings=True)
    own = {i: np.asarray(v) / np.linalg.norm(v)
           for i, v in zip(got["ids"], got["embeddings"], strict=True)}
    q = np.asarray(store.embedder.query(query_view(code).dense, QUERY_CODE_TOKENS))
    q /= np.linalg.norm(q)
    assert all(abs(h.score - float(own[h.id] @ q)) < 1e-5 for h in hits)
    assert not search(store, "deadlock", kinds=["rules"], k=3, method="bm25",
                      cache_root=tmp_path / "cache")  # only a phrasing says "deadlock"


def test_asked_phrasings_are_searched_not_shown():
    rule = next(r for r in load_rules() if r.asked)
    chunk = next(c for c in rule_chunks() if c.metadata["rule_id"] == rule.id)
    assert asked_of(chunk.text) == [" ".join(a.split()) for a in rule.asked]
    hit = Hit(chunk.id, "rules", chunk.title, 1.0, chunk.text, chunk.metadata)
    assert not any(a in json.dumps(answer(hit)) for a in asked_of(chunk.text))
    fact = Chunk("arch", "F1", "\n".join(["SIMD-group = 32 threads.", *asked_lines(["simd?"])]),
                 {"arch_id": "F99"})
    got = answer(Hit(fact.id, "arch", fact.title, 1.0, fact.text, fact.metadata))
    assert got["text"] == "SIMD-group = 32 threads."


def test_dense_search_is_exact_and_the_same_every_time(tmp_path):
    """The dense channel scores every chunk by its cosine with the query (chromadb's approximate
    index left out a nearest chunk now and then, and rankings changed between processes)."""
    store = _store(tmp_path)
    query = "how to synchronize all threads of a workgroup"
    hits = search(store, query, kinds=["rules", "arch"], k=4, method="dense",
                  cache_root=tmp_path / "cache")
    got = {n: store.documents(n, include_embeddings=True) for n in ("rules", "arch")}
    vectors = {i: v for g in got.values() for i, v in zip(g["ids"], g["embeddings"], strict=True)}
    q = np.asarray(store.embedder.query(query))
    cosine = {i: float(np.dot(v, q) / np.linalg.norm(v) / np.linalg.norm(q))
              for i, v in vectors.items()}
    assert [h.id for h in hits] == sorted(cosine, key=lambda i: -cosine[i])
    assert all(abs(h.score - cosine[h.id]) < 1e-5 for h in hits)


def test_a_bm25_cache_built_with_other_terms_is_rebuilt(tmp_path):
    store = _store(tmp_path)
    search(store, "arrives", kinds=["rules"], method="bm25", cache_root=tmp_path / "cache")
    cache = BM25Cache(store, "rules", tmp_path / "cache")
    ids = cache.root / store.revision("rules") / "ids.json"
    meta = json.loads(ids.read_text())
    del meta["tokens"]  # as an older kport wrote it: unstemmed terms
    ids.write_text(json.dumps(meta))
    from kb import search as search_module

    search_module._LOADED.clear()
    hits = search(store, "arrive", kinds=["rules"], method="bm25",
                  cache_root=tmp_path / "cache")
    assert hits and "tokens" in json.loads(ids.read_text())


def test_opaque_spellings_carry_the_words_people_use():
    """kb/rules/glossary.toml: a rule written in code (`__clz`) also says what it does in words,
    so a question asked in words finds it; a rule naming no glossary spelling gets no line."""
    rules = {c.metadata["rule_id"]: c.text for c in rule_chunks()}
    assert "Also called: count leading zeros" in rules["intrinsics.clz"]
    assert "fp16" in rules["types.half"] and "bf16" in rules["types.bfloat16"]
    assert "Also called" not in rules["host.template_args"]
    fixes = {c.metadata["fix_id"]: c.text for c in fix_chunks()}
    assert "bfloat16" in fixes["types.atomic_element"]  # its title names `half`, `bfloat`
    assert also_called("clz(x)") == also_called("__clzll") != []
    assert also_called("uncle") == []  # whole identifiers only


@pytest.mark.parametrize("term, message", [
    ('spellings = ["not one"]\nwords = "w"', "spelling 'not one' is not one identifier"),
    ('spellings = ["clz"]', "give `spellings` \\(a list\\) and `words`"),
])
def test_a_bad_glossary_term_names_the_file_and_the_term(tmp_path, term, message):
    path = tmp_path / "glossary.toml"
    path.write_text(f'[[term]]\nspellings = ["ok"]\nwords = "fine"\n\n[[term]]\n{term}\n')
    with pytest.raises(RuleError, match=message) as err:
        load_glossary(path)
    assert str(path) in str(err.value) and "term 2" in str(err.value)


@pytest.mark.slow  # searches the whole knowledge base, built once (tests/tiers.py)
def test_a_question_in_words_finds_the_rule_written_in_code(built_store, tmp_path):
    """Without the glossary neither rule was in the top 3 (intrinsics.clz not in the top 10)."""
    for question, answers in [("count leading zeros", {"intrinsics.clz"}),
                              ("population count of a 32-bit word",
                               {"intrinsics.popc", "intrinsics.popcll"})]:
        hits = search(built_store, question, kinds=["rules", "fixes", "arch"], k=3,
                      cache_root=tmp_path / "cache")
        assert answers & {h.metadata.get("rule_id") for h in hits}, question


# Measured 0.878 (65 of 74) on a fresh build after the fourteenth to sixteenth rounds (0.892
# after the tenth to thirteenth; docs/kb.md, "Questions"); issue 18 asks for 0.9, not reached.
# One question below it (64 of 74): the floor allows for document vectors computed on another
# CPU.
HELD_OUT_RECALL_AT_3 = 0.86


@pytest.mark.slow  # searches the whole knowledge base, built once (tests/tiers.py)
def test_hybrid_search_answers_the_held_out_questions(built_store, tmp_path):
    r1, r3, mrr, n = recall(built_store, load_questions(), tmp_path / "cache")["held_out"]
    assert n >= 70
    assert r3 >= HELD_OUT_RECALL_AT_3, (
        f"held-out recall@3 {r3:.3f} (recall@1 {r1:.3f}, MRR {mrr:.3f})")
