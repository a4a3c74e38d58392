"""Run a case's Python reference inside the jail (corpus/check.py starts it): a case folder
that did not come with kport is code from elsewhere. Reads the inputs the parent wrote, calls
``fn(inputs, sizes)`` from the case's file and writes what it returned as plain arrays.

    python -I reference_child.py CASE_FOLDER FILE.py FUNCTION WORK_FOLDER

Imports nothing of kport's: the jail holds Python, its packages, the case folder and WORK only.
"""

import importlib.util
import json
import sys
import traceback
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
    if not callable(getattr(module, function, None)):
        raise LookupError(f"{file} has no function {function}")
    out = getattr(module, function)(inputs, meta["sizes"])
    if not isinstance(out, dict):
        raise TypeError(f"{function} returned {type(out).__name__}, not a dict of output arrays")
    np.savez(work_dir / "outputs.npz", **{k: np.asarray(v) for k, v in out.items()})
    return 0


def _one_line(err: BaseException, folder: str) -> str:
    """The error as one line, at the innermost line of the case's own files."""
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if Path(f.filename).resolve().is_relative_to(Path(folder).resolve())]
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}: " if frames else ""
    return f"{where}{type(err).__name__}: {err}".replace("\n", " ")[:500]


if __name__ == "__main__":
    try:
        sys.exit(main(*sys.argv[1:5]))
    except BaseException as err:  # noqa: BLE001 - whatever the case's code raised, one line
        if isinstance(err, SystemExit) and err.code in (0, None):
            raise
        print(_one_line(err, sys.argv[1]), file=sys.stderr)
        sys.exit(1)
