"""Offline port benchmark: the translator over the whole corpus, and its construct coverage on
llama.cpp's CUDA kernels.

    python -m evals.bench_port [--llama llama_cpp_python-0.3.36.tar.gz] [--cases 012 ...]

Corpus: every case is translated offline from its CUDA source (roles and launch from the case
file) and checked against the case's oracle at every size set (one seed each), sanitizers on.
The translator uses no retrieval, so a case's own expert port never helps it (leave-one-out
holds trivially). Coverage: every __global__ kernel of ggml-cuda with the device functions it
calls, each file read as nvcc reads it with llama.cpp's include folders (so common.cuh's
helpers count and HIP branches do not), template parameters left symbolic; occurrences of the
CUDA constructs the concept rules name, mapped or left as TODO, and of the names nothing
defines, struct parameters and kernels without outputs, each a TODO.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from agent.repairs import with_repairs
from agent.translate import translate_kernel
from corpus.candidate import Candidate
from corpus.cases import discover
from corpus.port_check import check_translation
from kb.llama_cpp import CUDA_SUB, GGML_FILES, _extract, _find_root
from kb.parse import functions
from runners.cuda_sim.reading import nvcc_options, read_as_compiled
from runners.errors import KportError
from runners.lifetime import temp_folder


def corpus_table(ids: list[str] | None) -> tuple[list[tuple], list[str]]:
    rows: dict[str, list] = defaultdict(lambda: [0, 0, 0, 0])
    failures = []
    for case in discover(None, ids):
        src = (case.folder / case.cuda.source).read_text()
        r = rows[case.category]
        r[0] += 1
        try:
            tr = translate_kernel(src, case.cuda.kernel, roles={a.name: a.role for a in case.args},
                                  grid=case.cuda.grid, block=case.cuda.block,
                                  shared_mem=case.cuda.shared_mem, where=str(case.folder))
        except KportError as err:
            failures.append(f"{case.id}: not translated: {err}")
            continue
        # as `kport port --offline` does: the translation, then its mechanical repairs
        _, outs = with_repairs(case, Candidate.from_translation(tr),
                               lambda c, case=case: check_translation(case, c, seeds=1))
        notes = " | ".join(n for o in outs for n in o.notes)
        compiled = "compile error" not in notes
        correct = all(o.metal == "ok" for o in outs)
        r[1] += compiled
        r[2] += correct
        r[3] += len(tr.todos)
        if not correct:
            failures.append(f"{case.id}: {notes[:240]}")
    return sorted((cat, *v) for cat, v in rows.items()), failures


def llama_coverage(path: Path) -> tuple[Counter, Counter, int, list[str]]:
    """Construct counts over every kernel of ggml-cuda, each file read as nvcc reads it with
    llama.cpp's own include folders (runners/cuda_sim/reading.py: local headers, the #if
    groups a CUDA build reads, host libraries left out); a kernel counts with the device
    functions it calls (the translator's closure)."""
    mapped, unmapped, kernels, errors = Counter(), Counter(), 0, []
    with temp_folder("kport-bench-port-") as tmp:
        folder = path
        if path.is_file():
            _extract(path, Path(tmp), GGML_FILES)
            folder = Path(tmp)
        root = _find_root(folder)
        include = [root / "ggml" / "include", root / "ggml" / "src"]
        for f in sorted((root / CUDA_SUB).glob("*.cu*")):
            try:
                view = read_as_compiled(f.read_text(errors="replace"), f.name,
                                        nvcc_options(f, include))
            except KportError as err:
                errors.append(f"{f.name}: {type(err).__name__}: {err}"[:200])
                continue
            for fn in functions(view.text, "cuda"):
                if fn.kind != "kernel" or view.origin[fn.start_line - 1][0] != f.name:
                    continue  # each kernel counts once: in the file that defines it
                try:
                    tr = translate_kernel(view.text, fn.name, where=f.name, strict=False)
                except (KportError, RecursionError, ValueError, IndexError) as err:
                    errors.append(f"{f.name}:{fn.name}: {type(err).__name__}: {err}"[:200])
                    continue
                kernels += 1
                mapped.update(tr.mapped)
                unmapped.update(tr.unmapped)
    return mapped, unmapped, kernels, errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama", type=Path, help="llama-cpp-python sdist or llama.cpp checkout")
    ap.add_argument("--cases", nargs="*", help="only these corpus ids")
    ap.add_argument("--no-corpus", action="store_true", help="skip the corpus part")
    args = ap.parse_args(argv)
    if not args.no_corpus:
        t = time.perf_counter()
        rows, failures = corpus_table(args.cases)
        n = sum(r[1] for r in rows)
        print(f"## Offline port of the corpus ({n} cases, {time.perf_counter() - t:.0f} s)\n")
        print("| category | cases | compiled | correct | KPORT-TODO |\n|---|---|---|---|---|")
        for cat, cases, compiled, correct, todos in rows:
            print(f"| {cat} | {cases} | {compiled} | {correct} | {todos} |")
        tot = [sum(r[i] for r in rows) for i in range(1, 5)]
        print(f"| **all** | {tot[0]} | {tot[1]} | {tot[2]} ({tot[2] / max(tot[0], 1):.0%}) | "
              f"{tot[3]} |\n")
        for f in failures:
            print(f"- {f}")
    if args.llama:
        mapped, unmapped, kernels, errors = llama_coverage(args.llama)
        m, u = sum(mapped.values()), sum(unmapped.values())
        print(f"\n## Construct coverage on llama.cpp ggml-cuda ({kernels} kernels, "
              f"{len(errors)} not analysed)\n")
        print(f"{m} of {m + u} occurrences mapped ({m / max(m + u, 1):.1%})\n")
        print("| construct | mapped | left as TODO |\n|---|---|---|")
        for c in sorted(set(mapped) | set(unmapped), key=lambda c: -(mapped[c] + unmapped[c])):
            print(f"| `{c}` | {mapped[c]} | {unmapped[c]} |")
        for e in errors[:20]:
            print(f"- {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
