"""A chart PNG that is real: PNG signature, decodes, big enough, and drawn like a chart.

Beyond "not blank" (a few distinct saturated colours, as plotted series have), the image must
show what any matplotlib chart shows, whatever its style, size or resolution, and what a flat
picture (coloured stripes, a solid rectangle) does not:

- axes: long thin straight lines, one across at least 40% of the width or down at least 40% of
  the height, and one the other way across at least 25% (spines, the x axis, grid lines: grid
  lines may hide behind tall bars): pixels unlike the pixels 1 to 4 rows above and below them
  (columns left and right), in one row (column);
- text: at least ``MIN_GLYPHS`` small connected marks of ink (unsaturated pixels far from the
  background: the letters, digits and tick marks of the title, the labels and the ticks);
- bars (``min_bars``): bar-like regions, each a run of at least 3 adjacent columns (rows, for
  horizontal bars) holding a run of one saturated colour with the same first and last row (a
  bar, a legend patch, a histogram bin; bins of equal height side by side count once).

Everything is measured on the decoded pixels with fixed thresholds: deterministic, and no pixel
is compared with any expected image.
"""

from pathlib import Path

import numpy as np
from PIL import Image

SATURATED = 40  # max - min channel at least this: a colour, not white, black or grey
COLOUR_SHARE = 0.002  # a colour counts when at least this share of the pixels has it
LINE_CONTRAST = 10  # a line pixel differs by more than this (a channel) from both sides
LINE_SPAN = 0.4  # of the width (height): the longest line one way
LINE_SPAN_OTHER = 0.25  # of the height (width): the longest line the other way
INK_CONTRAST = 100  # ink differs by at least this (a channel) from the background
MIN_GLYPHS = 20


def check_png(path, min_w, min_h, min_colours, min_bars=0):
    path = Path(path)
    assert path.is_file(), f"{path} is missing"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    with Image.open(path) as img:
        assert img.format == "PNG"
        img.load()
        w, h = img.size
        assert w >= min_w and h >= min_h, f"{path} is {w}x{h}, smaller than {min_w}x{min_h}"
        flat = Image.new("RGBA", img.size, (255, 255, 255, 255))  # transparency over white
        flat.alpha_composite(img.convert("RGBA"))
        rgb = np.asarray(flat.convert("RGB"), dtype=np.int16)
    colours = saturated_colours(rgb)
    assert len(colours) >= min_colours, (
        f"{path} shows {len(colours)} distinct colours; is it a chart?"
    )
    across, down = line_spans(rgb)
    longest, other = max(across, down), min(across, down)
    assert longest >= LINE_SPAN and other >= LINE_SPAN_OTHER, (
        f"{path}: its longest straight lines span {across:.0%} of the width and {down:.0%} of "
        f"the height (axes: {LINE_SPAN:.0%} one way, {LINE_SPAN_OTHER:.0%} the other); "
        "is it a chart?"
    )
    glyphs = count_glyphs(rgb)
    assert glyphs >= MIN_GLYPHS, (
        f"{path} shows {glyphs} small marks of text (a title, axis labels and tick labels make "
        f"more than {MIN_GLYPHS}); is it a chart?"
    )
    if min_bars:
        bars = count_bars(rgb, colours)
        assert bars >= min_bars, f"{path} shows {bars} bars, fewer than {min_bars}"


def saturated_colours(rgb):
    """The saturated colours (channels in steps of 32) that at least COLOUR_SHARE of the pixels
    have, each as a key of ``quantised(rgb)``."""
    keys = quantised(rgb)
    spread = rgb.max(axis=2) - rgb.min(axis=2)
    found, counts = np.unique(keys[spread >= SATURATED], return_counts=True)
    return [int(k) for k, c in zip(found, counts) if c >= keys.size * COLOUR_SHARE]


def quantised(rgb):
    q = rgb // 32
    return q[:, :, 0] * 64 + q[:, :, 1] * 8 + q[:, :, 2]


def differs(a, b):
    return np.abs(a - b).max(axis=-1) > LINE_CONTRAST


def line_spans(rgb):
    """(share of the width, share of the height) covered by the best row (column) of pixels
    each unlike the pixels 1 to 4 rows above and below it (columns left and right of it):
    lines up to 4 pixels thick, anywhere in that row (column)."""
    return _row_span(rgb), _row_span(rgb.transpose(1, 0, 2))


def _row_span(rgb):
    h, w = rgb.shape[:2]
    line = np.zeros((h, w), dtype=bool)
    for k in range(1, 5):
        if h <= 2 * k:
            break
        mid = rgb[k : h - k]
        line[k : h - k] |= differs(mid, rgb[: h - 2 * k]) & differs(mid, rgb[2 * k :])
    return float(line.sum(axis=1).max()) / w


def count_glyphs(rgb):
    """Connected (8-neighbour) marks of ink at most an eighth of the image across, of at least
    3 pixels: letters, digits, tick marks (lines and frames are bigger)."""
    h, w = rgb.shape[:2]
    grey = rgb.max(axis=2) - rgb.min(axis=2) < SATURATED
    wide = rgb.astype(np.int32)
    packed = (wide[:, :, 0] << 16) | (wide[:, :, 1] << 8) | wide[:, :, 2]
    values, counts = np.unique(packed[grey], return_counts=True)
    if not len(values):
        return 0
    top = int(values[counts.argmax()])
    background = np.array([top >> 16, (top >> 8) & 255, top & 255], dtype=np.int16)
    ink = grey & (np.abs(rgb - background).max(axis=2) >= INK_CONTRAST)
    runs = []  # (row, first column, last column) of each horizontal run of ink
    parent = []

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    above = []  # the previous row's runs: (first, last, index)
    for y in range(h):
        edges = np.flatnonzero(np.diff(ink[y].astype(np.int8), prepend=0, append=0))
        here = []
        j = 0
        for first, end in zip(edges[::2].tolist(), edges[1::2].tolist()):
            last = end - 1
            index = len(runs)
            runs.append((y, first, last))
            parent.append(index)
            while j < len(above) and above[j][1] < first - 1:
                j += 1
            k = j
            while k < len(above) and above[k][0] <= last + 1:
                a, b = root(index), root(above[k][2])
                if a != b:
                    parent[b] = a
                k += 1
            here.append((first, last, index))
        above = here
    boxes = {}
    for index, (y, first, last) in enumerate(runs):
        box = boxes.setdefault(root(index), [y, y, first, last, 0])
        box[1] = max(box[1], y)
        box[2] = min(box[2], first)
        box[3] = max(box[3], last)
        box[4] += last - first + 1
    return sum(
        1
        for top_row, bottom, left, right, size in boxes.values()
        if size >= 3 and bottom - top_row < h / 8 and right - left < w / 8
    )


def count_bars(rgb, colours):
    """Bars standing up or lying down, whichever gives more (see the module)."""
    keys = quantised(rgb)
    return max(_bars(keys, colours), _bars(keys.T, colours))


def _bars(keys, colours):
    """For each colour, the runs of adjacent columns that hold a run of that colour with the
    same first and last row, those at least 3 columns wide."""
    bars = 0
    for colour in colours:
        mask = keys == colour
        edges = np.diff(mask.T.astype(np.int8), axis=1, prepend=0, append=0)
        cols, starts = np.nonzero(edges == 1)
        _, ends = np.nonzero(edges == -1)
        open_ = {}  # (first row, last row) -> (first column, last column)
        done = []
        for col, first, last in zip(cols.tolist(), starts.tolist(), (ends - 1).tolist()):
            key = (first, last)
            span = open_.get(key)
            if span and span[1] == col - 1:
                open_[key] = (span[0], col)
            else:
                if span:
                    done.append((key, span))
                open_[key] = (col, col)
        done.extend(open_.items())
        bars += sum(1 for (a, b), (c, d) in done if d - c >= 2)
    return bars
