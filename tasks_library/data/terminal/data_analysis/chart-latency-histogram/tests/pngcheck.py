"""A chart PNG that is real: PNG signature, decodes, big enough, and not blank (it holds a few
distinct saturated colours, as plotted series do)."""

from pathlib import Path

from PIL import Image


def check_png(path, min_w, min_h, min_colours):
    path = Path(path)
    assert path.is_file(), f"{path} is missing"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    with Image.open(path) as img:
        assert img.format == "PNG"
        img.load()
        w, h = img.size
        assert w >= min_w and h >= min_h, f"{path} is {w}x{h}, smaller than {min_w}x{min_h}"
        rgb = img.convert("RGB").resize((w // 2, h // 2), Image.NEAREST)
    counts = {}
    raw = rgb.tobytes()
    for i in range(0, len(raw), 3):
        r, g, b = raw[i], raw[i + 1], raw[i + 2]
        if max(r, g, b) - min(r, g, b) < 40:  # white, black, greys: background, axes, text
            continue
        key = (r // 32, g // 32, b // 32)
        counts[key] = counts.get(key, 0) + 1
    total = rgb.size[0] * rgb.size[1]
    colours = [k for k, c in counts.items() if c >= total * 0.002]
    assert len(colours) >= min_colours, (
        f"{path} shows {len(colours)} distinct colours; is it a chart?"
    )
