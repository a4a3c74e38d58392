"""Run a case's Python reference inside the jail (evals/corpus_check.py starts it): a case folder
that did not come with kport is code from elsewhere. Reads the inputs the parent wrote, calls
``fn(inputs, sizes)`` from the case's file and writes what it returned as plain arrays.

    python -I reference_child.py CASE_FOLDER FILE.py FUNCTION WORK_FOLDER

Imports nothing of kport's: the jail holds Python, its packages, the case folder and WORK only.
"""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np


def main(folder: str, file: str, function: str, work: str) -> int:
    work_dir = Path(work)
    spec = importlib.util.spec_from_file_location("kport_reference", Path(folder) / file)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, folder)  # a reference may import its case's own helper modules
    spec.loader.exec_module(module)
    with np.load(work_dir / "inputs.npz", allow_pickle=False) as f:
        inputs = {k: f[k] for k in f.files}
    meta = json.loads((work_dir / "meta.json").read_text())
    for name, dtype in meta["scalars"].items():
        inputs[name] = np.dtype(dtype).type(inputs[name])
    inputs = {k: inputs[k] for k in meta["order"]}
    out = getattr(module, function)(inputs, meta["sizes"])
    np.savez(work_dir / "outputs.npz", **{k: np.asarray(v) for k, v in dict(out).items()})
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
