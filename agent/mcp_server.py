"""`kport mcp`: kport's tools for coding assistants, over the Model Context Protocol.

    kport mcp                      # stdio (what an assistant launches)
    kport mcp --http --port 8765   # streamable HTTP on 127.0.0.1

Tools: kb_search, kb_rules_for, translate, sim_run, check_port, port, benchmark. Resources:
kport://rules (the concept rules), kport://arch/chips, kport://arch/families. A tool that
fails returns ``{"ok": false, "error": {"kind", "message"}}``, never a traceback.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import typer

import runners
from agent.harness import judge
from agent.nodes.bench import measure
from agent.port_cli import main as port_main
from agent.translate import translate_kernel
from agent.translate_cli import translation_json
from corpus.candidate import Launch
from corpus.cases import discover, load_case
from kb.answers import answers, render
from kb.arch import chips as all_chips
from kb.arch import families as all_families
from kb.concepts import load_rules
from kb.ready import ready_store
from kb.rules_match import kernel_tokens, match_rules
from kb.search import query_view, require_query, search
from runners import limits
from runners.dtypes import DTYPES
from runners.errors import KportError
from runners.lifetime import temp_folder
from runners.settings import load_settings

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  help=__doc__.splitlines()[0])


def _structured(fn):
    """Run a tool; a KportError (or bad input) becomes a structured error result."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return {"ok": True, **fn(*args, **kwargs)}
        except (KportError, ValueError, KeyError, TypeError) as err:
            return {"ok": False, "error": {"kind": type(err).__name__, "message": str(err)}}
    return wrapper


def kb_search(query: str, kinds: list[str] | None = None, k: int = 5) -> dict:
    """Search the knowledge base (rules, arch, analogues, docs, fixes; built on first use).
    Each hit: rank, calibrated confidence (0-1), title and an ``answer`` (a rule's text, CUDA
    and Metal spellings, a short example pair and its source; a fix; an analogue and its pair),
    plus the raw chunk. When ``query`` is CUDA code, ``lines`` says which of its lines each hit
    concerns and an analogue's ``corresponds`` the lines of its own that do that work."""
    require_query(query)  # before the KB is built on first use
    settings = load_settings()
    store, built = ready_store(settings)
    hits = search(store, query, kinds=kinds, k=k, cache_root=settings.home / "cache")
    rows = answers(hits, query, lines=query_view(query).is_code)
    return {"hits": rows, "text": render(rows, "the query" if rows and rows[0]["lines"]
                                         is not None else None),
            **({"note": built} if built else {})}


def kb_rules_for(source: str, kernel: str | None = None) -> dict:
    """The concept rules that apply to a CUDA source (or one kernel in it)."""
    return {"rules": [h.as_json() for h in match_rules(kernel_tokens(source, kernel))]}


def translate(source: str, kernel: str, grid: list | None = None, block: list | None = None,
              roles: dict[str, str] | None = None, shared_mem: int = 0) -> dict:
    """The offline translator's Metal draft of a CUDA kernel, with coverage and TODOs."""
    tr = translate_kernel(source, kernel, roles=roles, grid=grid, block=block,
                          shared_mem=shared_mem)
    return {"translation": translation_json(tr)}


def sim_run(body: str, inputs: dict, outputs: dict, grid: list[int], threadgroup: list[int],
            header: str = "", template: dict | None = None) -> dict:
    """Run an MLX metal_kernel body in metal_sim. ``inputs``: name -> {"data": nested list,
    "dtype"}; ``outputs``: name -> {"shape", "dtype"}. Returns outputs and findings."""
    import mlx.core as mx  # lazy: MLX is heavy (Metal on macOS); only sim_run needs it

    for name, spec in [*inputs.items(), *outputs.items()]:
        if spec.get("dtype", "float32") not in DTYPES:
            raise ValueError(f"{name}: unknown dtype {spec.get('dtype')!r}; one of "
                             f"{', '.join(DTYPES)}")
    limits.check_metal_launch(grid, threadgroup, "grid/threadgroup")
    nbytes = sum(limits.check_shape(spec["shape"], np.dtype(DTYPES[spec.get("dtype", "float32")]
                                                            [0]).itemsize, f"outputs.{name}.shape")
                 for name, spec in outputs.items())
    limits.check_bytes(nbytes, "outputs")
    arrays = [mx.array(np.asarray(v["data"], dtype=v.get("dtype", "float32")))
              for v in inputs.values()]
    k = runners.get("metal_sim").kernel("mcp_kernel", list(inputs), list(outputs), body, header)
    record = k.launch(inputs=arrays, output_shapes=[tuple(o["shape"]) for o in outputs.values()],
                      output_dtypes=[getattr(mx, o.get("dtype", "float32"))
                                     for o in outputs.values()],
                      grid=tuple(grid), threadgroup=tuple(threadgroup),
                      template=list((template or {}).items()) or None)
    return {"compiled": record.compiled,
            "diagnostics": [str(d) for d in record.diagnostics][:10],
            "findings": [str(f) for f in record.findings][:10],
            "outputs": {n: np.array(a).tolist() for n, a in zip(outputs, record.outputs,
                                                               strict=False)}}


def _case(case: str):
    path = Path(case)
    return load_case(path) if (path / "case.toml").is_file() else discover(None, [case])[0]


def check_port(case: str, body: str, header: str = "") -> dict:
    """Judge a Metal body for a corpus case (id or folder) through the cheat-proof harness."""
    return {"verdict": judge(_case(case), body, header).as_json()}


def port(source: str, kernel: str, case: str | None = None) -> dict:
    """Port a CUDA kernel offline end to end; the package's report.json and kernel.metal."""
    with temp_folder("kport-mcp-port-") as tmp:
        src = Path(tmp) / "kernel.cu"
        src.write_text(source)
        args = [str(src), "--kernel", kernel, "--out", str(Path(tmp) / "pkg"), "--offline"]
        if case:
            args += ["--case", str(_case(case).folder)]
        try:
            code = port_main(args)
        except SystemExit as done:  # typer ends with the exit code
            code = done.code if isinstance(done.code, int) else 1
        pkg = Path(tmp) / "pkg"
        if not (pkg / "report.json").is_file():
            raise ValueError(f"kport port stopped (exit {code}) before writing a package")
        return {"accepted": code == 0, "report": json.loads((pkg / "report.json").read_text()),
                "kernel_metal": (pkg / "kernel.metal").read_text()}


def benchmark(case: str, body: str, header: str = "") -> dict:
    """Time a Metal body (the case's [metal] launch) with real MLX: Apple Silicon only."""
    if not runners.get("mlx_metal").available():
        raise ValueError("benchmark needs Apple Silicon with Metal: this machine has none "
                         "(mx.metal.is_available() is False); use check_port here")

    c = _case(case)
    port = Launch.from_metal(c.metal).with_source(body, header, origin="mcp")
    return {"benchmark": measure(port, c, "M1")}


def _resources() -> dict[str, callable]:
    def rules() -> str:
        return json.dumps([r.model_dump(exclude={"example"}) for r in load_rules()])

    def chips() -> str:
        return json.dumps([c.model_dump() for c in all_chips()])

    def families() -> str:
        return json.dumps([f.model_dump() for f in all_families()])

    return {"kport://rules": rules, "kport://arch/chips": chips,
            "kport://arch/families": families}


def build_server():
    """The MCP server with every tool and resource registered."""
    # lazy: optional (kport[mcp]); `kport mcp --help` does without it
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("kport", instructions="Port CUDA kernels to Apple Metal for MLX: search "
                       "the knowledge base, translate, run in the simulator, check, port.")
    for fn in (kb_search, kb_rules_for, translate, sim_run, check_port, port, benchmark):
        server.tool(name=fn.__name__, description=fn.__doc__)(_structured(fn))
    for uri, fn in _resources().items():
        server.resource(uri, name=uri.split("//")[1], mime_type="application/json")(fn)
    return server


@app.command()
def mcp(http: bool = typer.Option(False, "--http", help="streamable HTTP instead of stdio"),
        port_: int = typer.Option(8765, "--port", help="HTTP port (127.0.0.1)")):
    """Serve kport's tools over MCP (stdio by default)."""
    try:
        server = build_server()
    except ImportError:
        raise KportError("the MCP server needs the `mcp` package: pip install 'kport[mcp]'") \
            from None
    if http:
        server.run("streamable-http", host="127.0.0.1", port=port_)
    else:
        server.run("stdio")


def main(argv: list[str]) -> int:
    """Entry of `kport mcp`."""
    return app(args=argv, prog_name="kport mcp", standalone_mode=True) or 0
