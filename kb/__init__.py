"""Knowledge: CUDA->Metal rules as data, tree-sitter ingestion, the chromadb store, retrieval."""

VERBS: dict[str, tuple[str, str]] = {}
