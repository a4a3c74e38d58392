"""Case loading and checking, the cheat-proof harness, batch runs, reports, benchmarks."""

VERBS = {
    "corpus": ("evals.corpus_cli", "list the kernel corpus and check its cases in the simulators"),
    "check": ("evals.check_cli", "judge a candidate Metal port of a case (cheat-proof harness)"),
}
