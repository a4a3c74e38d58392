"""Inline SVG charts for the eval report: self-contained markup (no scripts, no fonts or files
fetched), so report.html opens anywhere, offline. One chart kind: horizontal bars, one row per
label and one or more bars per row (a grouped bar chart), with a value axis and a legend.
"""

from __future__ import annotations

from html import escape

GREEN, RED, BLUE, GREY, AMBER = "#2e7d32", "#c62828", "#1565c0", "#9e9e9e", "#ef8f00"
ROW_GAP, BAR_H = 10, 16


def _ticks(vmax: float, integer: bool = False) -> list[float]:
    """About five round tick values from 0 to at least ``vmax`` (whole steps for counts)."""
    if vmax <= 0:
        return [0.0, 1.0]
    raw = vmax / 5
    mag = _magnitude(raw)
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    step = max(1, round(step)) if integer else step
    n = int(-(-vmax // step))
    return [round(i * step, 10) for i in range(n + 1)]


def _magnitude(x: float) -> float:
    """The power of ten at or just below ``x`` (> 0)."""
    mag = 1.0
    while mag * 10 <= x:
        mag *= 10
    while mag > x:
        mag /= 10
    return mag


def hbars(rows: list[tuple[str, list[tuple[float, str, str]]]], *, unit: str = "",
          vmax: float | None = None, legend: list[tuple[str, str]] = (), width: int = 760,
          title: str = "", integer: bool = False) -> str:
    """An SVG of horizontal bars: ``rows`` is ``[(label, [(value, colour, tooltip), ...])]``
    (``integer``: the values are counts); returns the ``<svg>`` markup (a note in a ``<p>``
    when there are no rows)."""
    if not rows:
        return "<p><em>nothing to plot</em></p>"
    label_w = min(260, 12 + 7 * max(len(label) for label, _ in rows))
    plot_w = width - label_w - 60
    top = 28 if title else 8
    per_row = max(len(bars) for _, bars in rows) * BAR_H + ROW_GAP
    ticks = _ticks(vmax if vmax is not None else max(
        (v for _, bars in rows for v, _, _ in bars), default=1.0), integer)
    scale = plot_w / ticks[-1] if ticks[-1] else 1.0
    height = top + len(rows) * per_row + 40 + (18 if legend else 0)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
           '<rect width="100%" height="100%" fill="#ffffff"/>']
    if title:
        out.append(f'<text x="{label_w}" y="18" font-size="14" font-weight="bold">'
                   f'{escape(title)}</text>')
    axis_y = top + len(rows) * per_row
    for t in ticks:
        x = label_w + t * scale
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{axis_y}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{x:.1f}" y="{axis_y + 14}" font-size="11" text-anchor="middle">'
                   f'{t:g}{escape(unit)}</text>')
    for i, (label, bars) in enumerate(rows):
        y = top + i * per_row + ROW_GAP / 2
        mid = y + len(bars) * BAR_H / 2 + 4
        out.append(f'<text x="{label_w - 6}" y="{mid:.1f}" font-size="12" text-anchor="end">'
                   f'{escape(label)}</text>')
        for j, (value, colour, tip) in enumerate(bars):
            w = max(value * scale, 1.5 if value else 0)
            by = y + j * BAR_H
            out.append(f'<rect x="{label_w}" y="{by:.1f}" width="{w:.1f}" '
                       f'height="{BAR_H - 3}" fill="{colour}"><title>{escape(tip)}</title>'
                       '</rect>')
            out.append(f'<text x="{label_w + w + 4:.1f}" y="{by + BAR_H - 5:.1f}" '
                       f'font-size="11">{value:g}{escape(unit)}</text>')
    out.append(f'<line x1="{label_w}" y1="{top}" x2="{label_w}" y2="{axis_y}" stroke="#424242"/>')
    x = label_w
    for name, colour in legend:
        ly = axis_y + 34
        out.append(f'<rect x="{x}" y="{ly - 10}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{x + 16}" y="{ly}" font-size="12">{escape(name)}</text>')
        x += 16 + 8 * len(name) + 24
    out.append("</svg>")
    return "\n".join(out)
