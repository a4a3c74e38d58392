"""Case loading and checking, the cheat-proof harness, batch runs, reports, benchmarks."""

VERBS: dict[str, tuple[str, str]] = {}
