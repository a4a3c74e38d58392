"""The chromadb store and retrieval: no duplicates, remove, export/import, filters, pairs,
clear errors for a missing, corrupt or mismatched store."""

import json

import pytest

from kb.chunks import Chunk
from kb.ingest import code_chunks, pair_chunks
from kb.search import search
from kb.store import KBError, KBStore


def _pair_chunks():
    cuda = code_chunks("__global__ void soft_max_f32(const float* x, float* y) {\n"
                       "  y[threadIdx.x] = expf(x[threadIdx.x]);\n}\n", "cuda", "s.cu", "mini")
    metal = code_chunks("kernel void kernel_soft_max(device const float* x, device float* y,\n"
                        "  uint i [[thread_position_in_grid]]) { y[i] = exp(x[i]); }\n",
                        "metal", "s.metal", "mini")
    doc = Chunk("docs", "Porting notes", "simd_sum replaces a shuffle-xor butterfly",
                {"source": "notes", "language": "markdown"})
    return pair_chunks(cuda, metal) + [doc]


def test_add_twice_never_duplicates_and_remove_by_source(tmp_path):
    store = KBStore(tmp_path / "kb", create=True)
    chunks = _pair_chunks()
    assert store.add(chunks) == {"added": 3, "present": 0}
    assert store.add(chunks) == {"added": 0, "present": 3}
    assert store.stats()["collections"]["analogues"] == 2
    assert store.remove("mini") == {"analogues": 2}
    assert store.stats()["collections"] == {"rules": 0, "arch": 0, "analogues": 0, "docs": 1,
                                            "fixes": 0}


def test_search_returns_the_pair_and_bm25_sees_new_chunks(tmp_path):
    store = KBStore(tmp_path / "kb", create=True)
    store.add(_pair_chunks())
    hits = search(store, "soft_max_f32 expf", kinds=["analogues"], language="cuda", k=1,
                  cache_root=tmp_path / "cache")
    assert hits[0].metadata["kernel"] == "soft_max_f32"
    assert hits[0].pair["metadata"]["kernel"] == "kernel_soft_max"
    assert "exp(x[i])" in hits[0].pair["text"]
    store.add([Chunk("docs", "Zebra facts", "zebragrams are rare", {"source": "z"})])
    hits = search(store, "zebragrams", method="bm25", k=1, cache_root=tmp_path / "cache")
    assert hits and hits[0].title == "Zebra facts"  # the cached BM25 index was rebuilt



def test_a_reader_sees_what_another_handle_writes_after_it_searched(tmp_path):
    """A handle remembers what it read of a published version (a collection that is absent,
    each revision): a write through another handle publishes a new version, and the reader's
    next search must see its new collection and its new chunks, text included."""
    writer = KBStore(tmp_path / "kb", create=True)
    writer.add(_pair_chunks()[:2])
    reader = KBStore(tmp_path / "kb")
    cache = tmp_path / "cache"
    assert search(reader, "zebragrams", method="bm25", k=3, cache_root=cache) == []
    assert reader.collection("docs") is None  # asked twice: the second answer was remembered
    before = reader.revisions(["analogues"])
    writer.add([Chunk("docs", "Zebra facts", "zebragrams are rare", {"source": "z"}),
                Chunk("analogues", "Zebra kernel", "void zebragrams_kernel() {}",
                      {"source": "z", "language": "cuda", "kernel": "zebragrams_kernel"})])
    assert reader.revisions(["analogues"]) != before
    hits = search(reader, "zebragrams", method="bm25", k=3, cache_root=cache)
    assert {h.title for h in hits} == {"Zebra facts", "Zebra kernel"}
    assert {h.text for h in hits} >= {"zebragrams are rare"}


def test_a_bm25_cache_left_in_another_layout_is_rebuilt(tmp_path):
    """An older kport wrote the index files straight into the revision folder; a search must
    rebuild it, not fail on every query (seen on a KPORT_HOME kept across upgrades)."""
    import hashlib

    store = KBStore(tmp_path / "kb", create=True)
    store.add(_pair_chunks())
    key = hashlib.sha256(store.location.encode()).hexdigest()[:16]
    old = tmp_path / "cache" / "bm25" / key / "docs" / store.revision("docs")
    old.mkdir(parents=True)
    (old / "ids.json").write_text(json.dumps({"ids": [], "metadatas": []}))
    (old / "params.index.json").write_text("{}")  # no text/ or names/ index inside
    hits = search(store, "shuffle-xor butterfly", kinds=["docs"], method="bm25", k=1,
                  cache_root=tmp_path / "cache")
    assert hits and hits[0].title == "Porting notes"
    assert (old / "text").is_dir() and (old / "names").is_dir()

def test_export_import_round_trip(tmp_path):
    a = KBStore(tmp_path / "a", create=True)
    a.add(_pair_chunks())
    dump = tmp_path / "kb.jsonl"
    assert a.export(dump) == 3
    b = KBStore(tmp_path / "b", create=True)
    assert b.import_file(dump) == {"added": 3, "present": 0}
    assert b.import_file(dump) == {"added": 0, "present": 3}
    assert b.stats()["collections"] == a.stats()["collections"]
    ha = search(a, "softmax", k=3, cache_root=tmp_path / "ca")
    hb = search(b, "softmax", k=3, cache_root=tmp_path / "cb")
    assert [h.id for h in ha] == [h.id for h in hb]


def test_bad_import_names_the_line(tmp_path):
    a = KBStore(tmp_path / "a", create=True)
    a.add(_pair_chunks())
    dump = tmp_path / "kb.jsonl"
    a.export(dump)
    lines = dump.read_text().splitlines()
    lines[2] = '{"collection": "analogues", "text": "x"'
    dump.write_text("\n".join(lines))
    with pytest.raises(KBError, match=r"kb.jsonl:3: bad record"):
        KBStore(tmp_path / "b", create=True).import_file(dump)
    (tmp_path / "other.jsonl").write_text(json.dumps({"hello": 1}) + "\n")
    with pytest.raises(KBError, match="not a kport KB export"):
        KBStore(tmp_path / "b", create=True).import_file(tmp_path / "other.jsonl")


def test_missing_and_corrupt_stores_are_clear_errors(tmp_path):
    with pytest.raises(KBError, match="no knowledge base at .*kport kb build"):
        KBStore(tmp_path / "none")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "chroma.sqlite3").write_bytes(b"this is not a database" * 100)
    with pytest.raises(KBError, match="not a readable chromadb store"):
        KBStore(bad)


def test_model_mismatch_is_refused(tmp_path):
    store = KBStore(tmp_path / "kb", create=True)
    store.add(_pair_chunks())
    other = KBStore(tmp_path / "kb", embed_model="some/other-model")
    with pytest.raises(KBError, match="embedded with 'all-MiniLM-L6-v2'"):
        other.collection("analogues")


@pytest.mark.slow  # reads the whole knowledge base, built once (tests/tiers.py)
def test_filters_on_the_built_kb(built_store, tmp_path):
    hits = search(built_store, "block reduction with shared memory", kinds=["analogues"], k=8,
                  features=["shared", "barrier"], language="metal",
                  cache_root=tmp_path / "cache")
    assert hits
    for h in hits:
        assert h.metadata["f_shared"] and h.metadata["f_barrier"]
        assert h.metadata["language"] == "metal"
    hits = search(built_store, "attention", kinds=["analogues"], category="attention", k=20,
                  cache_root=tmp_path / "cache")
    assert hits and {h.metadata["category"] for h in hits} == {"attention"}
    with pytest.raises(KBError, match="unknown feature 'sharde'"):
        search(built_store, "x", features=["sharde"], cache_root=tmp_path / "cache")


@pytest.mark.slow  # reads the whole knowledge base, built once (tests/tiers.py)
def test_a_cuda_kernel_finds_its_expert_port(built_store, tmp_path):
    from pathlib import Path

    case = Path(__file__).parents[2] / "corpus" / "cases" / "013_layernorm_fwd"
    hits = search(built_store, (case / "kernel.cu").read_text(), kinds=["analogues"],
                  language="metal", k=5, cache_root=tmp_path / "cache")
    assert case.name in [h.metadata.get("case") for h in hits]


def test_an_empty_query_is_an_error_not_the_store_order(tmp_path):
    store = KBStore(tmp_path / "kb", create=True)
    store.add(_pair_chunks())
    for query in ("", " \n\t"):
        with pytest.raises(KBError, match="the query is empty"):
            search(store, query, cache_root=tmp_path / "cache")
