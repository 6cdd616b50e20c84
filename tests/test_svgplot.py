"""The report's inline SVG charts: well-formed, drawing what the report holds, escaping what it quotes."""

import math
import re
import xml.etree.ElementTree as ET

import pytest

from lmu_edge import report_html, svgplot


def _tree(svg: str) -> ET.Element:
    # inline SVG in HTML needs no namespace; ElementTree parses it as plain XML
    return ET.fromstring(svg)


def _bars(root: ET.Element) -> list:
    """Rectangles drawn inside the clipped data group (bars and cells, not frames or legends)."""
    return [r for g in root.iter("g") if g.get("clip-path") for r in g.iter("rect")]


def _report():
    """A small report as ``report.analyze`` writes it: three tensors, steps, one LMU, a sweep."""
    tensors = []
    for i, (name, sq) in enumerate((("lmu.u", 56.3), ("lmu.state", 55.4), ("lmu.out", 37.0))):
        tensors.append(
            {
                "name": name,
                "type": "int8" if i == 2 else "fixed<16,11>",
                "sqnr_db": sq,
                "hist_edges": [-1.0, -0.5, 0.0, 0.5, 1.0],
                "hist": [1, 5, 7, 2],
                "type_range": [-2.0, 2.0],
                **({"bound": 1.5} if i == 1 else {}),
            }
        )
    sweep = [
        {
            "weight_bits": w,
            "state_bits": s,
            "sqnr_db": None if (w, s) == (8, 16) else 10.0 * w,
            "memory_bytes": 100 * s,
            "metric": {"name": "accuracy", "value": w / 10, "higher_is_better": True},
        }
        for w in (4, 8)
        for s in (8, 16)
    ]
    return {
        "tensors": tensors,
        "diagnosis": {"tensor": "lmu.out"},
        "step_errors": {"max": [0.1, 0.0, 0.05, 0.2], "mean": [0.01, 0.0, 0.02, 0.03]},
        "lmu": [
            {
                "layer": "lmu",
                "rows": [0, 5],
                "h_float": [[1.0, 0.5, 0.25], [0.0, 0.3, -0.2]],
                "h_quantized": [[1.0, 0.5, 0.24], [0.0, 0.31, -0.2]],
                "impulse_response_error": 1e-3,
                "poles_float": [[0.9, 0.1], [0.9, -0.1]],
                "poles_quantized": [[0.89, 0.1], [0.89, -0.1]],
                "spectral_radius_float": 0.9055,
                "spectral_radius_quantized": 0.8956,
            }
        ],
        "sweep": sweep,
        "sweep_float": {"name": "accuracy", "value": 0.9},
    }


def test_every_chart_is_well_formed_svg_with_what_the_report_holds():
    figs = report_html.figures(_report())
    assert set(figs) == {"sqnr", "ranges", "steps", "lmu_lmu", "sweep"}
    roots = {k: _tree(v) for k, v in figs.items()}
    for k, root in roots.items():
        assert root.tag == "svg" and root.get("class") == "chart", k
        assert float(root.get("width")) > 100 and float(root.get("height")) > 100, k
    # one bar per tensor, the diagnosed tensor's in red, the others in the first colour
    fills = [r.get("fill") for r in _bars(roots["sqnr"])]
    assert fills == [svgplot.color(0), svgplot.color(0), svgplot.color(3)]
    heights = [float(r.get("height")) for r in _bars(roots["sqnr"])]
    assert heights[0] > heights[1] > heights[2] > 0  # 56.3 > 55.4 > 37.0 dB, from one zero line
    # one histogram panel per tensor (four bins each), the type range (red, dashed) in every panel and
    # the state bound (green, dotted) where the tensor has one
    assert len(_bars(roots["ranges"])) == 3 * 4
    lines = [(ln.get("stroke"), ln.get("stroke-dasharray")) for ln in roots["ranges"].iter("line")]
    assert lines.count((svgplot.color(3), "5,3")) == 3 * 2
    assert lines.count((svgplot.color(2), "1.5,2.5")) == 2
    # the sweep: one cell per (state, weight) width, the best metric brightest, "exact" written out
    cells = _bars(roots["sweep"])
    assert len(cells) == 4 and svgplot.viridis(1.0) in {c.get("fill") for c in cells}
    texts = [t.text for t in roots["sweep"].iter("text")]
    assert "exact" in texts and "0.800" in texts and "8-bit state (800 B)" in texts
    # the poles: a filled circle per float pole, a cross per quantized one, and the unit circle's line
    assert len(list(roots["lmu_lmu"].iter("circle"))) == 2 + 1  # + the legend's sample
    assert len(list(roots["lmu_lmu"].iter("path"))) == 2 + 1


def test_every_chart_clips_to_its_own_axes():
    """Each plot clips its data to its axes by a clipPath id; in one page every id must be unique, or a
    chart would be clipped by another chart's rectangle (ids from id(), reused once a plot is freed, gave
    two charts of one report the same id)."""
    figs = report_html.figures(_report())
    html = "".join(figs.values())
    ids = re.findall(r'clipPath id="([^"]+)"', html)
    assert len(ids) == 1 + 3 + 1 + 2 + 1 and len(set(ids)) == len(ids)  # sqnr, 3 panels, steps, lmu, sweep
    assert sorted(re.findall(r'clip-path="url\(#([^)]+)\)"', html)) == sorted(ids)


def test_a_log_axis_leaves_out_what_it_cannot_draw():
    """An error of exactly 0 at a step has no place on a log axis: the line breaks there (as matplotlib
    draws it) instead of plunging to a made-up floor."""
    root = _tree(report_html.figures({"step_errors": {"max": [0.1, 0.0, 0.05, 0.2], "mean": [0.0] * 4}})["steps"])
    polys = [p for p in root.iter("polyline")]
    assert len(polys) == 2  # max: [0.1] and [0.05, 0.2]; mean: nothing
    assert [len(p.get("points").split()) for p in polys] == [1, 2]
    ticks = [t.text for t in root.iter("text") if t.text and t.text.startswith("1e")]
    assert ticks and "1e-1" in ticks and "1e-2" in ticks
    # an exact model (no error at any step) still gets a chart, not an exception
    _tree(report_html.figures({"step_errors": {"max": [0.0] * 3, "mean": [0.0] * 3}})["steps"])


def test_names_from_a_model_file_are_escaped():
    """Layer names come from the model file (untrusted): quoted into the page's SVG, markup in them must
    stay text, or a crafted model would run script in whoever opens report.html."""
    rep = _report()
    evil = '<script>alert(1)</script>"&'
    rep["tensors"][0]["name"] = evil
    rep["lmu"][0]["layer"] = evil
    figs = report_html.figures(rep)
    for svg in figs.values():
        assert "<script" not in svg
    root = _tree(figs["sqnr"])
    assert evil in [t.text for t in root.iter("text")]  # shown as the text it is


@pytest.mark.parametrize(
    "lo,hi,expect",
    [
        (0.0, 1.0, ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]),
        (0.0, 7.3, ["0", "2", "4", "6"]),
        (-1.1, 1.1, ["-1.0", "-0.5", "0.0", "0.5", "1.0"]),
        (0.0, 10000.0, ["0", "2000", "4000", "6000", "8000", "10000"]),
        (0.00012, 0.00031, ["0.00015", "0.00020", "0.00025", "0.00030"]),
    ],
)
def test_ticks_are_round_numbers_inside_the_range(lo, hi, expect):
    ticks = svgplot.nice_ticks(lo, hi)
    assert all(lo - 1e-12 <= t <= hi + 1e-12 for t in ticks)
    assert [svgplot.tick_label(t, ticks) for t in ticks] == expect


def test_equal_axes_keep_circles_round():
    p = svgplot.Plot(400, 200, equal=True, xlim=(-1, 1), ylim=(-1, 1))
    (xl, yl) = p._limits()
    pw, ph = 400 - p.ml - p.mr, 200 - p.mt - p.mb
    assert math.isclose((xl[1] - xl[0]) / pw, (yl[1] - yl[0]) / ph)
