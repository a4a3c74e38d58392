"""The report of an eval run (and optionally a comparison with another run): ``report.md`` and
one self-contained ``report.html`` (inline CSS and SVG from evals/plots.py; no scripts, nothing
fetched). Sections: the metrics, success by category, time per case, the speedup distribution
where Apple timings exist, every case, and with a second run a side-by-side table.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from html import escape
from pathlib import Path

from evals.plots import AMBER, BLUE, GREEN, GREY, RED, hbars
from evals.results import metrics, read_results, read_run

NO_TIMINGS = ("No speedups: Apple GPU timings exist only on Apple Silicon (runners/mlx_metal), "
              "and every speedup of this run is null, so fast_p is null too.")
SPEEDUP_BINS = ((0, 0.5, "< 0.5x"), (0.5, 1, "0.5-1x"), (1, 1.5, "1-1.5x"), (1.5, 2, "1.5-2x"),
                (2, 4, "2-4x"), (4, float("inf"), ">= 4x"))
CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;
margin:24px auto;max-width:1100px;color:#212121;background:#fafafa}
h1{font-size:24px}h2{font-size:19px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:13px;background:#fff}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eceff1}.ok{color:#2e7d32;font-weight:600}.bad{color:#c62828;font-weight:600}
.note{color:#555}svg{background:#fff;border:1px solid #eee;margin:6px 0}"""


@dataclass
class Run:
    """One run folder read back: its name, run.json, records and metrics."""

    name: str
    info: dict
    records: list[dict]
    metrics: dict


def load_run(folder: Path) -> Run:
    """The run in ``folder``; RunDirError (from evals.results) for a missing or malformed
    folder, run.json or results.jsonl. A half-written last line is left out."""
    info = read_run(folder)
    records, _ = read_results(folder)
    p = info["settings"].get("fast_p", 1.0)
    return Run(Path(folder).resolve().name, info, records, metrics(records, p))


def _categories(run: Run) -> list[tuple[str, int, int, int]]:
    """(category, cases, compiled, correct) sorted by category."""
    rows = defaultdict(lambda: [0, 0, 0])
    for r in run.records:
        row = rows[r["category"]]
        row[0] += 1
        row[1] += bool(r["compiled"])
        row[2] += bool(r["correct"])
    return sorted((c, *v) for c, v in rows.items())


def _speedup_bins(run: Run) -> list[tuple[str, int]]:
    sp = [r["speedup"] for r in run.records if r.get("speedup") is not None]
    return [(label, sum(lo <= s < hi for s in sp)) for lo, hi, label in SPEEDUP_BINS] if sp \
        else []


def _pct(a: int, n: int) -> str:
    return f"{100 * a / n:.0f}%" if n else "-"


def _metric_rows(runs: list[Run]) -> list[list[str]]:
    keys = [("cases", "cases"), ("compiled", "compiled_pct"), ("correct", "correct_pct"),
            (f"fast_p (p={runs[0].metrics['p']:g})", "fast_p"),
            ("mean iterations", "mean_iterations"), ("wall s per case", "wall_s_per_case"),
            ("LLM tokens", "llm_tokens")]
    rows = [["mode"] + [r.info["settings"].get("mode", "?") for r in runs]]
    for label, key in keys:
        vals = []
        for r in runs:
            v = r.metrics[key]
            vals.append("null" if v is None else f"{v:g}%" if key.endswith("pct") else
                        f"{v:.0%}" if key == "fast_p" else f"{v:g}")
        rows.append([label] + vals)
    return rows


def _case_rows(run: Run) -> list[list[str]]:
    return [[r["case"], r["category"], "yes" if r["compiled"] else "no",
             "yes" if r["correct"] else "no", f"{r['wall_s']:.1f}", str(r["iterations"]),
             str(r["llm_tokens"]), "-" if r["todos"] is None else str(r["todos"]),
             "-" if r["speedup"] is None else f"{r['speedup']:.2f}x",
             (r["reasons"][0] if r["reasons"] else "")[:160]]
            for r in sorted(run.records, key=lambda r: r["case"])]


CASE_HEAD = ["case", "category", "compiled", "correct", "wall s", "iterations", "tokens",
             "TODOs", "speedup", "first reason"]


def _compare_rows(a: Run, b: Run) -> list[list[str]]:
    """Per case of either run: correct and time in each, and what changed."""
    ra, rb = {r["case"]: r for r in a.records}, {r["case"]: r for r in b.records}
    rows = []
    for case in sorted(set(ra) | set(rb)):
        x, y = ra.get(case), rb.get(case)
        cx = "-" if x is None else ("yes" if x["correct"] else "no")
        cy = "-" if y is None else ("yes" if y["correct"] else "no")
        change = ("only in one run" if x is None or y is None else "same" if cx == cy else
                  "fixed" if cy == "yes" else "broken")
        rows.append([case, cx, cy, "-" if x is None else f"{x['wall_s']:.1f}",
                     "-" if y is None else f"{y['wall_s']:.1f}", change])
    return rows


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + \
        ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]


def _header(run: Run) -> list[str]:
    s, v = run.info["settings"], run.info.get("versions", {})
    return [f"mode {s.get('mode')}, executor {s.get('executor')} x{s.get('workers')}, seeds "
            f"{s.get('seeds')}, case budget {s.get('timeout_s')} s; started "
            f"{run.info.get('started')}, finished {run.info.get('finished', 'not yet')}",
            f"kport {v.get('kport')} ({(v.get('git_commit') or '-')[:10]}), Python "
            f"{v.get('python')}, {v.get('platform')}",
            f"isolation: {run.info.get('isolation', 'not recorded')}",
            f"compiled by: {run.info.get('compiler', 'not recorded')}"]


def markdown(run: Run, other: Run | None = None) -> str:
    """report.md of ``run`` (and the comparison with ``other``)."""
    runs = [run] + ([other] if other else [])
    out = [f"# kport eval report: {run.name}", ""] + [f"- {line}" for line in _header(run)]
    out += ["", "## Metrics", ""] + _md_table(["metric"] + [r.name for r in runs],
                                               _metric_rows(runs))
    if run.metrics["fast_p_note"]:
        out += ["", f"fast_p: {run.metrics['fast_p_note']}."]
    out += ["", "## Success by category", ""] + _md_table(
        ["category", "cases", "compiled", "correct"],
        [[c, n, f"{k} ({_pct(k, n)})", f"{ok} ({_pct(ok, n)})"]
         for c, n, k, ok in _categories(run)])
    out += ["", "## Speedup distribution", ""]
    bins = _speedup_bins(run)
    out += _md_table(["speedup vs baseline", "cases"], bins) if bins else [NO_TIMINGS]
    out += ["", "## Cases", ""] + _md_table(CASE_HEAD, _case_rows(run))
    if other:
        out += ["", f"## Compared: {run.name} (A) vs {other.name} (B)", ""] + _md_table(
            ["case", "correct A", "correct B", "wall s A", "wall s B", "change"],
            _compare_rows(run, other))
    return "\n".join(out) + "\n"


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    def cell(c) -> str:
        cls = ' class="ok"' if c in ("yes", "fixed") else ' class="bad"' if c in (
            "no", "broken") else ""
        return f"<td{cls}>{escape(str(c))}</td>"

    return ("<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(cell(c) for c in row) + "</tr>" for row in rows)
            + "</table>")


def html(run: Run, other: Run | None = None) -> str:
    """report.html of ``run`` (and the comparison with ``other``): one self-contained page."""
    runs = [run] + ([other] if other else [])
    cats = _categories(run)
    parts = [f"<h1>kport eval report: {escape(run.name)}</h1>"]
    parts += [f'<p class="note">{escape(line)}</p>' for line in _header(run)]
    parts += ["<h2>Metrics</h2>", _html_table(["metric"] + [r.name for r in runs],
                                              _metric_rows(runs))]
    if run.metrics["fast_p_note"]:
        parts.append(f'<p class="note">fast_p: {escape(run.metrics["fast_p_note"])}.</p>')
    parts += ["<h2>Success by category</h2>", hbars(
        [(f"{c} ({n})", [(round(100 * k / n, 1), BLUE, f"{k}/{n} compiled"),
                         (round(100 * ok / n, 1), GREEN, f"{ok}/{n} correct")])
         for c, n, k, ok in cats], unit="%", vmax=100,
        legend=[("compiled", BLUE), ("correct", GREEN)], title="compiled and correct, %")]
    timed = sorted(run.records, key=lambda r: -r["wall_s"])
    parts += ["<h2>Time per case</h2>", hbars(
        [(r["case"], [(r["wall_s"], GREEN if r["correct"] else RED,
                       "correct" if r["correct"] else "rejected")]) for r in timed],
        unit=" s", legend=[("correct", GREEN), ("rejected", RED)],
        title="wall seconds per case (port + judge)")]
    bins = _speedup_bins(run)
    parts.append("<h2>Speedup distribution</h2>")
    parts.append(hbars([(label, [(n, AMBER, f"{n} cases")]) for label, n in bins],
                       title="correct cases by speedup over the case's expert port",
                       integer=True) if bins
                 else f'<p class="note">{escape(NO_TIMINGS)}</p>')
    parts += ["<h2>Cases</h2>", _html_table(CASE_HEAD, _case_rows(run))]
    if other:
        rows = _compare_rows(run, other)
        parts += [f"<h2>Compared: {escape(run.name)} (A) vs {escape(other.name)} (B)</h2>",
                  _html_table(["case", "correct A", "correct B", "wall s A", "wall s B",
                               "change"], rows),
                  hbars([(r[0], [(float(t), colour, side) for t, colour, side in
                                 ((r[3], BLUE, "A"), (r[4], GREY, "B")) if t != "-"])
                         for r in rows], unit=" s", legend=[(f"A {run.name}", BLUE),
                                                            (f"B {other.name}", GREY)],
                        title="wall seconds per case, A vs B (a case in one run only: one bar)")]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>kport eval report: {escape(run.name)}</title><style>{CSS}</style>"
            "</head><body>\n" + "\n".join(parts) + "\n</body></html>\n")


def write_report(run_dir: Path, out: Path, other_dir: Path | None = None) -> tuple[Path, Path]:
    """Write report.md and report.html of the run in ``run_dir`` (compared with ``other_dir``)
    into ``out``; returns their paths. Raises RunDirError for a bad run folder."""
    run = load_run(run_dir)
    other = load_run(other_dir) if other_dir is not None else None
    out.mkdir(parents=True, exist_ok=True)
    md, page = out / "report.md", out / "report.html"
    md.write_text(markdown(run, other))
    page.write_text(html(run, other))
    return md, page
