"""Small charts drawn as SVG on the server: no script, no inline style (the CSP forbids
both), colours from classes in console.css. Every label is escaped."""

from __future__ import annotations

from markupsafe import Markup, escape

PALETTE = 8  # classes s0..s7 in console.css


def bars(rows: list[tuple[str, int]], *, width: int = 420, bar: int = 16) -> Markup:
    """Horizontal bars, one per (label, count), longest first as given."""
    if not rows:
        return Markup('<p class="muted">Nothing yet.</p>')
    top = max(n for _, n in rows) or 1
    label_w = 150
    room = width - label_w - 60
    h = len(rows) * (bar + 6) + 4
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {width} {h}" width="{width}" height="{h}"'
        ' xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, (label, n) in enumerate(rows):
        y = i * (bar + 6) + 2
        w = max(1, round(room * n / top))
        short = label if len(label) <= 22 else label[:21] + "…"
        parts.append(
            f'<text x="{label_w - 6}" y="{y + bar - 4}" text-anchor="end" class="lbl">'
            f"<title>{escape(label)}</title>{escape(short)}</text>"
            f'<rect x="{label_w}" y="{y}" width="{w}" height="{bar}" class="s{i % PALETTE}"/>'
            f'<text x="{label_w + w + 4}" y="{y + bar - 4}" class="num">{n}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def stacked(
    days: list[str], series: dict[str, list[int]], *, width: int = 520, height: int = 150
) -> Markup:
    """Stacked columns per day, one colour per series, with a legend below."""
    total = [sum(s[i] for s in series.values()) for i in range(len(days))]
    if not series or not any(total):
        return Markup(f'<p class="muted">None in the last {len(days)} days.</p>')
    top = max(total) or 1
    plot_h = height - 30
    col = (width - 40) / max(1, len(days))
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" xmlns="http://www.w3.org/2000/svg">'
        f'<text x="0" y="12" class="num">{top}</text>'
        f'<line x1="34" y1="{plot_h}" x2="{width}" y2="{plot_h}" class="axis"/>'
    ]
    names = list(series)
    for i, day in enumerate(days):
        x = 38 + i * col
        y = float(plot_h)
        for k, name in enumerate(names):
            n = series[name][i]
            if not n:
                continue
            h = plot_h * n / top
            y -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(1.0, col - 3):.1f}" height="{h:.1f}" '
                f'class="s{k % PALETTE}"><title>{escape(day)} {escape(name)}: {n}</title></rect>'
            )
        if i in (0, len(days) - 1) or i == len(days) // 2:
            parts.append(f'<text x="{x:.1f}" y="{height - 4}" class="lbl">{escape(day[5:])}</text>')
    parts.append("</svg>")
    legend = "".join(
        f'<span class="key"><span class="sw s{k % PALETTE}"></span>{escape(name)} '
        f"({sum(series[name])})</span>"
        for k, name in enumerate(names)
    )
    return Markup("".join(parts) + f'<div class="legend">{legend}</div>')
