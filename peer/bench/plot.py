"""A grouped bar chart as a standalone SVG: benchmark figures as an image, no plotting library."""

from __future__ import annotations

from collections.abc import Mapping
from xml.sax.saxutils import escape

WIDTH, BAR_H, GAP, LEFT, RIGHT, TOP = 640, 16, 10, 150, 90, 40
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def bar_chart_svg(groups: Mapping[str, Mapping[str, float]], title: str, unit: str) -> str:
    """One horizontal bar per (group, label), each group scaled to its own largest value.

    Groups are measured in different units of work (8 sessions against 100), so
    each is drawn relative to its own best, with the value written beside the bar.
    """
    rows = sum(len(bars) for bars in groups.values())
    height = TOP + rows * (BAR_H + 4) + len(groups) * (GAP + 18) + 10
    span = WIDTH - LEFT - RIGHT
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="{WIDTH // 2}" y="22" text-anchor="middle" font-size="14">'
           f'{escape(title)}</text>']
    y = TOP
    for group, bars in groups.items():
        out.append(f'<text x="8" y="{y + 12}" font-weight="bold">{escape(group)}</text>')
        y += 18
        top = max(bars.values(), default=0.0) or 1.0
        for k, (label, value) in enumerate(bars.items()):
            w = max(span * value / top, 1.0)
            colour = COLOURS[k % len(COLOURS)]
            out.append(f'<text x="{LEFT - 6}" y="{y + BAR_H - 4}" text-anchor="end">'
                       f'{escape(label)}</text>')
            out.append(f'<rect x="{LEFT}" y="{y}" width="{w:.1f}" height="{BAR_H}" '
                       f'fill="{colour}"/>')
            out.append(f'<text x="{LEFT + w + 4:.1f}" y="{y + BAR_H - 4}">{value:,.1f} '
                       f'{escape(unit)}</text>')
            y += BAR_H + 4
        y += GAP
    out.append("</svg>")
    return "\n".join(out) + "\n"
