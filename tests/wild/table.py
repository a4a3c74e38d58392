"""Print the wild set's table (docs/translate.md): every kernel of tests/wild/catalog.py ported
and checked, as tests/wild/test_wild.py does. ``python -m tests.wild.table [ID ...]``;
``--jobs N`` ports N at a time."""

from __future__ import annotations

import argparse
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.wild.catalog import all_entries
from tests.wild.harness import Outcome, port_and_check, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("ids", nargs="*")
    parser.add_argument("--jobs", type=int, default=2)
    opts = parser.parse_args()
    catalog = {w.id: w for w in all_entries()}
    unknown = sorted(set(opts.ids) - set(catalog))
    if unknown:
        parser.error(f"no wild kernel {unknown[0]!r}; known: {', '.join(catalog)}")
    chosen = [catalog[i] for i in opts.ids] if opts.ids else list(catalog.values())
    with tempfile.TemporaryDirectory(prefix="kport-wild-") as tmp:
        def one(w) -> Outcome:
            work = Path(tmp) / w.id
            work.mkdir()
            out = port_and_check(w, work)
            print(f"{w.id}: {out.verdict} {out.checks or out.why}", flush=True)
            return out

        with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
            outcomes = list(pool.map(one, chosen))
    print()
    print(table(outcomes, catalog))


if __name__ == "__main__":
    main()
