"""Case loading and checking, the cheat-proof harness, batch runs, reports, benchmarks."""

VERBS = {
    "corpus": ("evals.corpus_cli", "list the kernel corpus and check its cases in the simulators"),
    "check": ("evals.check_cli", "judge a candidate Metal port of a case (cheat-proof harness)"),
    "eval": ("evals.eval_cli", "port and judge many cases in parallel (resumable JSON lines)"),
    "report": ("evals.report_cli", "render an eval run (and a comparison) as Markdown and HTML"),
}
