"""Knowledge: CUDA->Metal rules as data, tree-sitter ingestion, the chromadb store, retrieval."""

VERBS: dict[str, tuple[str, str]] = {
    "kb": ("kb.cli", "build, grow and search the knowledge base; rules for a CUDA file"),
}
