"""Small inline-SVG charts for the accuracy report.

The report draws a handful of simple charts (bars, histograms, lines, a scatter of poles, a grid of
cells). matplotlib took about half of every conversion's time drawing them (1.8 s of figures, plus
0.85 s to import it, against about 4 s for the rest of a C conversion); these charts are text built
in a few milliseconds, scale with the page and need nothing but a browser.

A :class:`Plot` is one set of axes in pixels: add bars, lines, markers and text in data coordinates,
then :func:`compose` lays plots out in rows under an optional title and returns one ``<svg>`` element.
"""

from __future__ import annotations

import html
import itertools
import math
from typing import Optional, Sequence

#: matplotlib's default colour cycle (the report's colours stay what readers know)
CYCLE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_VIRIDIS = ((0x44, 0x01, 0x54), (0x3B, 0x52, 0x8B), (0x21, 0x91, 0x8C), (0x5E, 0xC9, 0x62), (0xFD, 0xE7, 0x25))
_DASH = {"dashed": "5,3", "dotted": "1.5,2.5", None: None}
_CLIP_IDS = itertools.count()
FONT = 'font-family="DejaVu Sans, Arial, sans-serif"'


def color(i: int) -> str:
    """The ``i``-th colour of the cycle (wraps around)."""
    return CYCLE[i % len(CYCLE)]


def viridis(t: float) -> str:
    """A colour of the viridis map for ``t`` in [0, 1] (linear between five of its stops)."""
    t = min(1.0, max(0.0, float(t))) * (len(_VIRIDIS) - 1)
    i = min(int(t), len(_VIRIDIS) - 2)
    f = t - i
    rgb = [round(a + (b - a) * f) for a, b in zip(_VIRIDIS[i], _VIRIDIS[i + 1], strict=True)]
    return "#%02x%02x%02x" % tuple(rgb)


def _esc(s) -> str:
    return html.escape(str(s), quote=True)


def _num(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".")


def nice_ticks(lo: float, hi: float, n: int = 5) -> list:
    """About ``n`` round tick values (steps of 1, 2, 2.5 or 5 times a power of ten) within [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(n, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    first = math.ceil(lo / step - 1e-9)
    out = []
    k = first
    while k * step <= hi + step * 1e-9:
        out.append(round(k * step, 12) + 0.0)
        k += 1
    return out


def tick_label(v: float, ticks: Sequence[float]) -> str:
    """``v`` written with the fewest decimals that tell every one of ``ticks`` exactly."""
    if abs(v) >= 1e6 or (v != 0 and abs(v) < 1e-4):
        return f"{v:.1e}"
    span = max((abs(t) for t in ticks), default=1.0) or 1.0
    d = next((d for d in range(7) if all(abs(round(t, d) - t) <= 1e-9 * span for t in ticks)), 6)
    return f"{v:.{d}f}"


class Plot:
    """One chart: axes of ``width`` x ``height`` pixels (margins included); data added in data units.

    ``ylog``: logarithmic y axis (values <= 0 are left out, as matplotlib does). ``xlim`` / ``ylim``
    fix the limits (a reversed pair flips the axis); otherwise they follow the data with a 5 % margin.
    ``equal``: one data unit is as long on both axes (the plot area is then made square-ish in data).
    """

    def __init__(
        self,
        width: int = 640,
        height: int = 240,
        *,
        title: str = "",
        xlabel: str = "",
        ylabel: str = "",
        ylog: bool = False,
        xlim: Optional[tuple] = None,
        ylim: Optional[tuple] = None,
        equal: bool = False,
        margins: tuple = (58, 14, 26, 40),
        font: float = 11.0,
    ):
        self.width, self.height = width, height
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.ylog, self.xlim, self.ylim, self.equal = ylog, xlim, ylim, equal
        self.ml, self.mr, self.mt, self.mb = margins
        self.font = font
        self.items: list = []  # (kind, payload)
        self.xs: list = []  # data seen, for the automatic limits
        self.ys: list = []
        self.y_from_zero = False
        self.legend_entries: list = []
        self.legend_loc = "upper right"
        self.xticks_fixed: Optional[tuple] = None
        self.yticks_fixed: Optional[tuple] = None
        self.rotate_x = 0

    # --- data ---------------------------------------------------------------------------------
    def _see(self, xs, ys=()):
        self.xs += [float(v) for v in xs if math.isfinite(float(v))]
        self.ys += [float(v) for v in ys if math.isfinite(float(v)) and (not self.ylog or float(v) > 0)]

    def line(self, xs, ys, stroke: str, *, width: float = 1.4, dash: Optional[str] = None, label: str = ""):
        """A polyline; a point that cannot be drawn (not finite, or <= 0 on a log axis) breaks it."""
        xs, ys = [float(v) for v in xs], [float(v) for v in ys]
        self._see(xs, ys)
        self.items.append(("line", (xs, ys, stroke, width, dash)))
        if label:
            self.legend_entries.append(("line", stroke, dash, label))

    def bars(self, lefts, heights, widths, fill, *, align: str = "edge"):
        """Bars from 0 to each height; ``fill`` one colour or one per bar; ``align`` 'edge' or 'center'."""
        lefts, heights = [float(v) for v in lefts], [float(v) for v in heights]
        widths = [float(w) for w in widths] if hasattr(widths, "__len__") else [float(widths)] * len(lefts)
        if align == "center":
            lefts = [a - w / 2 for a, w in zip(lefts, widths, strict=True)]
        fills = [fill] * len(lefts) if isinstance(fill, str) else list(fill)
        self._see(lefts + [a + w for a, w in zip(lefts, widths, strict=True)], heights + [0.0])
        self.y_from_zero = True
        self.items.append(("bars", (lefts, heights, widths, fills)))

    def markers(self, xs, ys, stroke: str, *, marker: str = "o", size: float = 3.2, label: str = ""):
        """Markers: 'o' (filled circle) or 'x'."""
        xs, ys = [float(v) for v in xs], [float(v) for v in ys]
        self._see(xs, ys)
        self.items.append(("markers", (xs, ys, stroke, marker, size)))
        if label:
            self.legend_entries.append((marker, stroke, None, label))

    def vline(self, x: float, stroke: str, *, dash: Optional[str] = None, width: float = 1.0):
        """A vertical line across the axes at ``x`` (its x counts for the limits, as in matplotlib)."""
        self._see([x])
        self.items.append(("vline", (float(x), stroke, dash, width)))

    def rect(self, x0, y0, x1, y1, fill: str):
        """A filled rectangle in data units (a heat map's cell)."""
        self._see([x0, x1], [y0, y1])
        self.items.append(("rect", (float(x0), float(y0), float(x1), float(y1), fill)))

    def text(self, x, y, s: str, *, fill: str = "#000", size: Optional[float] = None, anchor: str = "middle"):
        """Text centred (or anchored) at a data point; lines split at newlines."""
        self.items.append(("text", (float(x), float(y), str(s), fill, size or self.font, anchor)))

    def xticks(self, positions, labels, *, rotate: int = 0):
        """Fixed x ticks with these labels (rotated by ``rotate`` degrees, anchored at their end)."""
        self.xticks_fixed = ([float(p) for p in positions], [str(s) for s in labels])
        self.rotate_x = rotate

    def yticks(self, positions, labels):
        """Fixed y ticks with these labels."""
        self.yticks_fixed = ([float(p) for p in positions], [str(s) for s in labels])

    def legend(self, loc: str = "upper right"):
        """Where the legend of the labelled lines and markers goes: 'upper right', 'lower left', ..."""
        self.legend_loc = loc

    # --- geometry -----------------------------------------------------------------------------
    def _limits(self):
        def auto(vals, zero):
            if not vals:
                return (0.0, 1.0)
            lo, hi = min(vals), max(vals)
            if zero:
                lo, hi = min(lo, 0.0), max(hi, 0.0)
            if hi == lo:
                pad = abs(lo) * 0.05 or 0.5
                return (lo - pad, hi + pad)
            pad = (hi - lo) * 0.05
            return (lo if zero and lo == 0 else lo - pad, hi if zero and hi == 0 else hi + pad)

        xl = self.xlim or auto(self.xs, False)
        if self.ylog:
            if self.ylim:
                yl = self.ylim
            elif self.ys:
                lo, hi = min(self.ys), max(self.ys)
                yl = (10.0 ** math.floor(math.log10(lo)), 10.0 ** math.ceil(math.log10(hi) + 1e-12))
                if yl[0] == yl[1]:
                    yl = (yl[0] / 10, yl[1] * 10)
            else:
                yl = (1e-3, 1.0)
        else:
            yl = self.ylim or auto(self.ys, self.y_from_zero)
        if self.equal:  # widen the shorter span so one unit is as long on both axes
            pw, ph = self.width - self.ml - self.mr, self.height - self.mt - self.mb
            sx, sy = abs(xl[1] - xl[0]) / pw, abs(yl[1] - yl[0]) / ph
            if sx > sy:
                c, h = (yl[0] + yl[1]) / 2, (yl[1] - yl[0]) / 2 * sx / sy
                yl = (c - h, c + h)
            else:
                c, h = (xl[0] + xl[1]) / 2, (xl[1] - xl[0]) / 2 * sy / sx
                xl = (c - h, c + h)
        return xl, yl

    def svg_body(self) -> str:
        """The chart's SVG elements (no ``<svg>`` wrapper), in its own pixel frame."""
        xl, yl = self._limits()
        x0, x1 = self.ml, self.width - self.mr
        y0, y1 = self.height - self.mb, self.mt  # pixel y of the lower and upper limits

        def px(x):
            return x0 + (x - xl[0]) / (xl[1] - xl[0]) * (x1 - x0)

        def py(y):
            if self.ylog:
                y = math.log10(max(y, 1e-300))
                lo, hi = math.log10(yl[0]), math.log10(yl[1])
            else:
                lo, hi = yl
            return y0 + (y - lo) / (hi - lo) * (y1 - y0)

        out = []
        f = self.font
        clip = f"lmu-clip-{next(_CLIP_IDS)}"  # unique in the page (an id() is reused once a plot is freed)
        out.append(f'<clipPath id="{clip}"><rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}"/></clipPath>')
        # ticks and their grid
        if self.xticks_fixed:
            xt, xlab = self.xticks_fixed
        else:
            xt = [t for t in nice_ticks(min(xl), max(xl)) if min(xl) <= t <= max(xl)]
            xlab = [tick_label(t, xt) for t in xt]
        if self.yticks_fixed:
            yt, ylab = self.yticks_fixed
        elif self.ylog:
            k0, k1 = math.ceil(math.log10(yl[0]) - 1e-9), math.floor(math.log10(yl[1]) + 1e-9)
            step = max(1, math.ceil((k1 - k0 + 1) / 6))
            yt = [10.0**k for k in range(k0, k1 + 1, step)]
            ylab = [f"1e{k}" for k in range(k0, k1 + 1, step)]
        else:
            yt = [t for t in nice_ticks(min(yl), max(yl)) if min(yl) <= t <= max(yl)]
            ylab = [tick_label(t, yt) for t in yt]
        for t, s in zip(xt, xlab, strict=True):
            x = px(t)
            out.append(
                f'<line x1="{_num(x)}" y1="{y0}" x2="{_num(x)}" y2="{y0 + 4}" stroke="#000" stroke-width="0.8"/>'
            )
            if self.rotate_x:
                out.append(
                    f'<text x="{_num(x)}" y="{y0 + 8}" font-size="{f - 1}" text-anchor="end" '
                    f'dominant-baseline="hanging" '
                    f'transform="rotate(-{self.rotate_x} {_num(x)} {y0 + 8})">{_esc(s)}</text>'
                )
            else:
                out.append(
                    f'<text x="{_num(x)}" y="{y0 + 6 + f}" font-size="{f - 1}" text-anchor="middle">{_esc(s)}</text>'
                )
        for t, s in zip(yt, ylab, strict=True):
            y = py(t)
            out.append(
                f'<line x1="{x0 - 4}" y1="{_num(y)}" x2="{x0}" y2="{_num(y)}" stroke="#000" stroke-width="0.8"/>'
            )
            out.append(
                f'<text x="{x0 - 6}" y="{_num(y)}" font-size="{f - 1}" text-anchor="end" '
                f'dominant-baseline="middle">{_esc(s)}</text>'
            )
        # data, clipped to the axes
        out.append(f'<g clip-path="url(#{clip})">')
        for kind, p in self.items:
            if kind == "bars":
                for a, h, w, c in zip(*p, strict=True):
                    xa, xb = sorted((px(a), px(a + w)))
                    ya, yb = sorted(
                        (py(0.0 if not self.ylog else max(yl[0], 1e-300)), py(h) if h > 0 or not self.ylog else y0)
                    )
                    out.append(
                        f'<rect x="{_num(xa)}" y="{_num(ya)}" width="{_num(max(xb - xa, 0.6))}" '
                        f'height="{_num(yb - ya)}" fill="{c}"/>'
                    )
            elif kind == "line":
                xs, ys, stroke, w, dash = p
                runs, cur = [], []
                for x, y in zip(xs, ys, strict=True):
                    if math.isfinite(x) and math.isfinite(y) and (not self.ylog or y > 0):
                        cur.append(f"{_num(px(x))},{_num(py(y))}")
                    elif cur:
                        runs.append(cur)
                        cur = []
                if cur:
                    runs.append(cur)
                d = f' stroke-dasharray="{_DASH.get(dash, dash)}"' if dash else ""
                for r in runs:
                    out.append(
                        f'<polyline points="{" ".join(r)}" fill="none" stroke="{stroke}" stroke-width="{w}"'
                        f' stroke-linejoin="round"{d}/>'
                    )
            elif kind == "markers":
                xs, ys, stroke, marker, s = p
                for x, y in zip(xs, ys, strict=True):
                    if not (math.isfinite(x) and math.isfinite(y)):
                        continue
                    cx, cy = _num(px(x)), _num(py(y))
                    if marker == "x":
                        a, b = px(x), py(y)
                        out.append(
                            f'<path d="M{_num(a - s)},{_num(b - s)}L{_num(a + s)},{_num(b + s)}M{_num(a - s)},'
                            f'{_num(b + s)}L{_num(a + s)},{_num(b - s)}" stroke="{stroke}" stroke-width="1.2"/>'
                        )
                    else:
                        out.append(f'<circle cx="{cx}" cy="{cy}" r="{s}" fill="{stroke}"/>')
            elif kind == "vline":
                x, stroke, dash, w = p
                d = f' stroke-dasharray="{_DASH.get(dash, dash)}"' if dash else ""
                out.append(
                    f'<line x1="{_num(px(x))}" y1="{y0}" x2="{_num(px(x))}" y2="{y1}" stroke="{stroke}" '
                    f'stroke-width="{w}"{d}/>'
                )
            elif kind == "rect":
                a, b, c, d, fill = p
                xa, xb = sorted((px(a), px(c)))
                ya, yb = sorted((py(b), py(d)))
                out.append(
                    f'<rect x="{_num(xa)}" y="{_num(ya)}" width="{_num(xb - xa)}" '
                    f'height="{_num(yb - ya)}" fill="{fill}"/>'
                )
        out.append("</g>")
        for kind, p in self.items:
            if kind == "text":
                x, y, s, fill, size, anchor = p
                lines = s.split("\n")
                top = py(y) - (len(lines) - 1) * size * 0.6
                for i, ln in enumerate(lines):
                    out.append(
                        f'<text x="{_num(px(x))}" y="{_num(top + i * size * 1.2)}" font-size="{size}" '
                        f'text-anchor="{anchor}" dominant-baseline="middle" fill="{fill}">{_esc(ln)}</text>'
                    )
        # frame, labels, title, legend
        out.append(
            f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="none" stroke="#000" '
            'stroke-width="0.8"/>'
        )
        if self.title:
            out.append(
                f'<text x="{(x0 + x1) / 2:.1f}" y="{self.mt - 8}" font-size="{f}" text-anchor="middle">'
                f"{_esc(self.title)}</text>"
            )
        if self.xlabel:
            out.append(
                f'<text x="{(x0 + x1) / 2:.1f}" y="{self.height - 6}" font-size="{f}" text-anchor="middle">'
                f"{_esc(self.xlabel)}</text>"
            )
        if self.ylabel:
            yc = (y0 + y1) / 2
            out.append(
                f'<text x="12" y="{yc:.1f}" font-size="{f}" text-anchor="middle" dominant-baseline="middle" '
                f'transform="rotate(-90 12 {yc:.1f})">{_esc(self.ylabel)}</text>'
            )
        if self.legend_entries:
            out.append(self._legend(x0, x1, y0, y1))
        return "\n".join(out)

    def _legend(self, x0, x1, y0, y1) -> str:
        s = max(self.font - 2, 7)
        width = 26 + 0.58 * s * max(len(e[3]) for e in self.legend_entries)
        height = 6 + len(self.legend_entries) * s * 1.35
        lx = x1 - width - 6 if "right" in self.legend_loc else x0 + 6
        ly = y1 + 6 if "upper" in self.legend_loc else y0 - height - 6
        out = [
            f'<rect x="{_num(lx)}" y="{_num(ly)}" width="{_num(width)}" height="{_num(height)}" fill="#fff" '
            f'fill-opacity="0.85" stroke="#ccc"/>'
        ]
        for i, (kind, stroke, dash, label) in enumerate(self.legend_entries):
            cy = ly + 3 + (i + 0.5) * s * 1.35
            if kind == "line":
                d = f' stroke-dasharray="{_DASH.get(dash, dash)}"' if dash else ""
                out.append(
                    f'<line x1="{_num(lx + 4)}" y1="{_num(cy)}" x2="{_num(lx + 20)}" y2="{_num(cy)}" '
                    f'stroke="{stroke}" stroke-width="1.5"{d}/>'
                )
            elif kind == "x":
                out.append(
                    f'<path d="M{_num(lx + 9)},{_num(cy - 3)}L{_num(lx + 15)},{_num(cy + 3)}M{_num(lx + 9)},'
                    f'{_num(cy + 3)}L{_num(lx + 15)},{_num(cy - 3)}" stroke="{stroke}" stroke-width="1.2"/>'
                )
            else:
                out.append(f'<circle cx="{_num(lx + 12)}" cy="{_num(cy)}" r="3" fill="{stroke}"/>')
            out.append(
                f'<text x="{_num(lx + 24)}" y="{_num(cy)}" font-size="{s}" dominant-baseline="middle">'
                f"{_esc(label)}</text>"
            )
        return "\n".join(out)


def compose(rows: Sequence[Sequence[Plot]], *, title: str = "", label: str = "", font: float = 11.0) -> str:
    """One ``<svg>`` of plots laid out in rows (each row left to right), under an optional title.
    ``label``: the chart's accessible name (``aria-label``)."""
    top = int(font * 2) if title else 0
    width = max(sum(p.width for p in row) for row in rows)
    height = top + sum(max(p.height for p in row) for row in rows)
    out = [
        f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{_esc(label or title)}" {FONT} font-size="{font}">',
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
    ]
    if title:
        out.append(
            f'<text x="{width / 2:.1f}" y="{font * 1.3:.1f}" font-size="{font}" text-anchor="middle">'
            f"{_esc(title)}</text>"
        )
    y = top
    for row in rows:
        x = 0
        for p in row:
            out.append(f'<g transform="translate({x},{y})">{p.svg_body()}</g>')
            x += p.width
        y += max(p.height for p in row)
    out.append("</svg>")
    return "\n".join(out)
