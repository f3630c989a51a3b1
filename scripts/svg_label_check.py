#!/usr/bin/env python3
"""Checks SVG charts as a renderer draws them: `svg_label_check.py CHART.svg...` (exit 1 on a fault).

The boxes come from the real glyphs, not from the writer's own width estimate: every <text> gets a fill
colour of its own and everything else is dropped, then `rsvg-convert -f svg` (librsvg, Debian's
librsvg2-bin) turns the glyphs into paths in canvas coordinates whose fill names the label. A label's box
is the extent of its path points in its own rotated frame, so two vertical labels side by side do not
count as overlapping. Checks: every label's box lies inside the canvas and draws something, no two boxes
overlap, every group of bars has its label under it, and the whole chart renders to a PNG that has ink
but none in its outermost pixels (a chart that draws to its very edge has been cut off there).

Groups: a bar (<rect class="bar">) names its group in data-group (older charts: in its <title> tooltip,
"series, group: value"); the bars of a group that stand together on one baseline need a label
(<text class="group">, or "category") with that text whose box lies under them and overlaps them
horizontally.
"""
from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib
from dataclasses import dataclass
from pathlib import Path

SVG_NS = "http://www.w3.org/2000/svg"
EDGE_PX = 2  # the band of the PNG that must stay background
OVERLAP_PX = 0.25  # boxes may touch; anti-aliasing makes anything less invisible


GROUP_GAP_PX = 40  # bars further apart than this on one baseline stand in different panels


@dataclass
class Label:
    text: str
    css_class: str
    corners: list[tuple[float, float]]  # the box in canvas coordinates, in order around it

    def extent(self) -> tuple[float, float, float, float]:
        xs, ys = [p[0] for p in self.corners], [p[1] for p in self.corners]
        return min(xs), min(ys), max(xs), max(ys)


@dataclass
class Bar:
    group: str
    x0: float
    x1: float
    base: float  # the bottom edge
    top: float = 0.0


def rsvg_convert(args: list[str], svg: bytes) -> bytes:
    exe = shutil.which("rsvg-convert")
    if exe is None:
        raise SystemExit("rsvg-convert not found: install Debian's librsvg2-bin (scripts/setup.sh does)")
    result = subprocess.run([exe, *args], input=svg, capture_output=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"rsvg-convert {' '.join(args)} failed: {result.stderr.decode(errors='replace')}")
    return result.stdout


def canvas_size(root: ET.Element) -> tuple[float, float]:
    box = root.get("viewBox")
    if box is not None:
        _, _, w, h = (float(v) for v in box.replace(",", " ").split())
        return w, h
    return float(root.get("width", "0").rstrip("px")), float(root.get("height", "0").rstrip("px"))


def rotation_of(element: ET.Element) -> float:
    match = re.search(r"rotate\(\s*([-+0-9.eE]+)", element.get("transform", ""))
    return float(match.group(1)) if match else 0.0


def path_points(d: str) -> list[tuple[float, float]]:
    """The end and control points of a path's drawing segments (cairo writes absolute M, L, C, Z only);
    a move that draws nothing (cairo leaves one after each glyph run) is not ink."""
    tokens = re.findall(r"[MLCZ]|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", d)
    points: list[tuple[float, float]] = []
    pending: tuple[float, float] | None = None
    i = 0
    while i < len(tokens):
        command = tokens[i]
        i += 1
        numbers: list[float] = []
        while i < len(tokens) and tokens[i] not in "MLCZ":
            numbers.append(float(tokens[i]))
            i += 1
        pairs = list(zip(numbers[0::2], numbers[1::2], strict=False))
        if command == "M":
            pending = pairs[-1] if pairs else None
        elif command in "LC" and pairs:
            if pending is not None:
                points.append(pending)
                pending = None
            points.extend(pairs)
    return points


def label_boxes(svg_text: bytes) -> tuple[float, float, list[Label], list[str]]:
    ET.register_namespace("", SVG_NS)
    root = ET.fromstring(svg_text)
    width, height = canvas_size(root)
    texts = [e for e in root.iter(f"{{{SVG_NS}}}text")]
    probe = ET.Element(root.tag, dict(root.attrib))
    for index, element in enumerate(texts, start=1):
        copy = ET.fromstring(ET.tostring(element))
        copy.set("fill", f"rgb({index >> 16},{(index >> 8) & 255},{index & 255})")
        copy.tail = None
        probe.append(copy)
    drawn = rsvg_convert(["-f", "svg"], ET.tostring(probe)).decode()
    points: dict[int, list[tuple[float, float]]] = {}
    for style, d in re.findall(r'<path style="([^"]*)"[^>]*?\sd="([^"]*)"', drawn):
        fill = re.search(r"fill:rgb\(([\d.]+)%,([\d.]+)%,([\d.]+)%\)", style)
        if fill is None:
            continue
        r, g, b = (round(float(v) * 255 / 100) for v in fill.groups())
        points.setdefault((r << 16) | (g << 8) | b, []).extend(path_points(d))
    labels: list[Label] = []
    faults: list[str] = []
    for index, element in enumerate(texts, start=1):
        text = " ".join(" ".join(element.itertext()).split())
        angle = rotation_of(element)
        pts = points.get(index, [])
        if not pts:
            faults.append(f"label {text!r} draws nothing")
            continue
        # Into the label's frame (undo its rotation), take the extent, and map the corners back.
        c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        local = [(x * c + y * s, -x * s + y * c) for x, y in pts]
        u0, u1 = min(p[0] for p in local), max(p[0] for p in local)
        v0, v1 = min(p[1] for p in local), max(p[1] for p in local)
        corners = [(u * c - v * s, u * s + v * c) for u, v in ((u0, v0), (u1, v0), (u1, v1), (u0, v1))]
        labels.append(Label(text, element.get("class", ""), corners))
    return width, height, labels, faults


def bars_of(svg_text: bytes) -> list[Bar]:
    bars = []
    for rect in ET.fromstring(svg_text).iter(f"{{{SVG_NS}}}rect"):
        if rect.get("class") != "bar":
            continue
        group = rect.get("data-group")
        if group is None:
            title = rect.find(f"{{{SVG_NS}}}title")
            tooltip = title.text if title is not None and title.text else ""
            group = tooltip.split(", ", 1)[-1].rsplit(": ", 1)[0]
        x, y = float(rect.get("x", "0")), float(rect.get("y", "0"))
        w, h = float(rect.get("width", "0")), float(rect.get("height", "0"))
        bars.append(Bar(" ".join(group.split()), x, x + w, y + h))
        bars[-1].top = y
    # The segments of a stacked bar touch: one bar, standing on the lowest one's bottom.
    stacks: list[Bar] = []
    for bar in sorted(bars, key=lambda b: (b.group, b.x0, b.x1, -b.base)):
        last = stacks[-1] if stacks else None
        if last and (last.group, last.x0, last.x1) == (bar.group, bar.x0, bar.x1) and bar.base >= last.top - 1:
            last.top = min(last.top, bar.top)
        else:
            stacks.append(bar)
    return stacks


def unlabelled_groups(bars: list[Bar], labels: list[Label]) -> list[str]:
    """Bars of one group on one baseline, clustered by position; each cluster needs its label under it."""
    clusters: list[Bar] = []
    for bar in sorted(bars, key=lambda b: (b.group, b.base, b.x0)):
        last = clusters[-1] if clusters else None
        if last and last.group == bar.group and abs(last.base - bar.base) < 1 and bar.x0 - last.x1 <= GROUP_GAP_PX:
            last.x1 = max(last.x1, bar.x1)
        else:
            clusters.append(Bar(bar.group, bar.x0, bar.x1, bar.base, bar.top))
    faults = []
    for cluster in clusters:
        under = [
            lab
            for lab in labels
            if lab.css_class in ("group", "category") and lab.text == cluster.group
            and lab.extent()[1] >= cluster.base - 1 and lab.extent()[0] < cluster.x1 and lab.extent()[2] > cluster.x0
        ]
        if not under:
            where = f"bars at x {cluster.x0:.0f}..{cluster.x1:.0f}"
            faults.append(f"group {cluster.group!r} ({where}) has no label under it")
    return faults


def overlap(a: Label, b: Label) -> bool:
    """Separating axes for two convex quadrilaterals: they overlap when no edge normal of either
    separates them by more than -OVERLAP_PX."""
    for quad in (a.corners, b.corners):
        for i in range(4):
            (x0, y0), (x1, y1) = quad[i], quad[(i + 1) % 4]
            nx, ny = y0 - y1, x1 - x0
            norm = math.hypot(nx, ny)
            if norm == 0:
                continue
            nx, ny = nx / norm, ny / norm
            pa = [x * nx + y * ny for x, y in a.corners]
            pb = [x * nx + y * ny for x, y in b.corners]
            if min(max(pa), max(pb)) - max(min(pa), min(pb)) <= OVERLAP_PX:
                return False
    return True


def png_rgba(png: bytes) -> tuple[int, int, list[bytes]]:
    """Rows of a non-interlaced 8-bit RGB or RGBA PNG (what cairo writes), as RGBA-or-RGB bytes."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise RuntimeError("not a PNG")
    pos, data, header = 8, b"", b""
    while pos < len(png):
        length = int.from_bytes(png[pos : pos + 4], "big")
        kind = png[pos + 4 : pos + 8]
        body = png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            data += body
        pos += 12 + length
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    depth, colour, interlace = header[8], header[9], header[12]
    if depth != 8 or colour not in (2, 6) or interlace != 0:
        raise RuntimeError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    bpp = 4 if colour == 6 else 3
    raw = zlib.decompress(data)
    stride = width * bpp
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind_byte, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if kind_byte == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind_byte == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, previous, strict=True))
        elif kind_byte == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 255
        elif kind_byte == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = previous[i]
                c = previous[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, [bytes(r) for r in rows] if bpp == 4 else [_rgb_to_rgba(r) for r in rows]


def _rgb_to_rgba(row: bytes) -> bytes:
    out = bytearray()
    for i in range(0, len(row), 3):
        out += row[i : i + 3] + b"\xff"
    return bytes(out)


def pixel_faults(svg_text: bytes, width: float, height: float) -> list[str]:
    w, h, rows = png_rgba(rsvg_convert(["-f", "png", "-b", "white"], svg_text))
    if (w, h) != (math.ceil(width), math.ceil(height)):
        return [f"PNG is {w}x{h}, the canvas {width}x{height}"]

    def ink(x: int, y: int) -> bool:
        r, g, b = rows[y][4 * x : 4 * x + 3]
        return min(r, g, b) < 250

    faults = []
    edge = [(x, y) for y in range(h) for x in range(w) if min(x, y, w - 1 - x, h - 1 - y) < EDGE_PX and ink(x, y)]
    if edge:
        faults.append(f"{len(edge)} pixels of ink in the outer {EDGE_PX} px, first at {edge[0]}")
    if not any(ink(x, y) for y in range(0, h, 2) for x in range(0, w, 2)):
        faults.append("the PNG is blank")
    return faults


def check_chart(path: str) -> list[str]:
    svg_text = Path(path).read_bytes()
    width, height, labels, faults = label_boxes(svg_text)
    for label in labels:
        x0, y0, x1, y1 = label.extent()
        if x0 < 0 or y0 < 0 or x1 > width or y1 > height:
            faults.append(
                f"label {label.text!r} at x {x0:.1f}..{x1:.1f}, y {y0:.1f}..{y1:.1f} "
                f"leaves the {width:g}x{height:g} canvas"
            )
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            if overlap(a, b):
                faults.append(f"labels {a.text!r} and {b.text!r} overlap")
    faults += unlabelled_groups(bars_of(svg_text), labels)
    faults += pixel_faults(svg_text, width, height)
    return [f"{path}: {f}" for f in faults]


def self_test() -> list[str]:
    """A chart with a clipped title, two overlapping labels, two vertical labels side by side (which must
    not count) and two bars of which one has its group label: the checker has to find the faults only."""
    svg = (
        f'<svg xmlns="{SVG_NS}" width="300" height="120" viewBox="0 0 300 120" font-family="sans-serif" '
        'font-size="12"><rect width="100%" height="100%" fill="white"/>'
        '<text x="150" y="20" text-anchor="middle" font-size="16">A title far too long for this canvas width</text>'
        '<text x="40" y="60">first</text><text x="52" y="62">second</text>'
        '<text transform="rotate(-90 200 112)" x="200" y="112">vertical a</text>'
        '<text transform="rotate(-90 215 112)" x="215" y="112">vertical b</text>'
        '<rect class="bar" data-group="g1" x="100" y="70" width="10" height="20" fill="blue"/>'
        '<rect class="bar" data-group="g2" x="130" y="70" width="10" height="20" fill="blue"/>'
        '<text class="group" x="105" y="104" text-anchor="middle">g1</text></svg>'
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "faulty.svg"
        path.write_text(svg)
        faults = check_chart(str(path))
    problems = []
    if not any("A title far too long" in f and "leaves" in f for f in faults):
        problems.append("self-test: the clipped title was not found")
    if not any("'first' and 'second' overlap" in f for f in faults):
        problems.append("self-test: the overlapping labels were not found")
    if any("vertical a" in f for f in faults):
        problems.append("self-test: vertical labels side by side were reported")
    if not any("group 'g2'" in f for f in faults) or any("group 'g1'" in f for f in faults):
        problems.append("self-test: the unlabelled group was not found, or the labelled one was reported")
    if not any("pixels of ink in the outer" in f for f in faults):
        problems.append("self-test: the clipped title's ink at the edge was not found")
    return problems + ([f"self-test saw: {faults}"] if problems else [])


def main(argv: list[str]) -> int:
    if argv == ["--self-test"]:
        problems = self_test()
    else:
        problems = [f for path in argv for f in check_chart(path)]
    for p in problems:
        print(p)
    print(f"svg_label_check: {len(problems)} fault(s) in {len(argv)} file(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
