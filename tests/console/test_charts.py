"""console/charts.py: the console's charts are SVG drawn on the server, with no script and no
inline style (the console's CSP forbids both) and every label escaped (labels are namespaces,
reason codes and redaction labels, which a caller chooses)."""

from __future__ import annotations

import re

from service.console.charts import PALETTE, bars, stacked

HOSTILE = '<script>alert("x")</script>'


def test_bars_escape_their_labels_and_scale_to_the_longest() -> None:
    svg = str(bars([(HOSTILE, 10), ("alice", 5)]))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert "style=" not in svg and svg.startswith("<svg")
    widths = [int(w) for w in re.findall(r'<rect [^>]*width="(\d+)"', svg)]
    assert widths[0] == 2 * widths[1]
    assert 'class="s0"' in svg and 'class="s1"' in svg


def test_a_long_label_is_cut_and_kept_whole_in_its_title() -> None:
    label = "alice:session-with-a-long-name"
    svg = str(bars([(label, 1)]))
    assert f"<title>{label}</title>" in svg and "alice:session-with-a-…" in svg


def test_stacked_columns_have_a_legend_with_totals_and_colours_cycle() -> None:
    days = ["2026-03-01", "2026-03-02", "2026-03-03"]
    series = {f"r{k}": [k, 0, 1] for k in range(PALETTE + 1)}
    html = str(stacked(days, series))
    assert f'class="s{PALETTE % PALETTE}"' in html
    assert "r3 (4)" in html and "03-01" in html and "03-03" in html
    assert "<script" not in html and "style=" not in html


def test_empty_charts_say_so() -> None:
    assert "Nothing yet" in str(bars([]))
    assert "None in the last 3 days" in str(stacked(["a", "b", "c"], {"r": [0, 0, 0]}))
    assert "None in the last 2 days" in str(stacked(["a", "b"], {}))
