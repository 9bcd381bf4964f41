"""`stepsim sweep --plot`: the picture itself, rendered by a real SVG renderer.

The SVG gnuplot writes is rendered to PNG by headless Chromium (Debian's chromium, installed by
tools/install-deps.sh --test) and read back with Pillow (python3-pil); the test looks at pixels:
the GPU capacity line (the only red, rgb(255, 0, 0)) must be one horizontal row across the
plot, and the series drawn first (no recompute, purple) must still show where a series with
nearly the same values (selective recompute with flash attention) is drawn over it.
"""

import os
import re
import shutil
import subprocess

import pytest

BINARY = os.environ["STEPSIM_BINARY"]


def render(svg, png, width, height):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium not installed (tools/install-deps.sh --test installs it)")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                    f"--screenshot={png}", f"--window-size={width},{height}",
                    f"file://{svg}"], check=True, capture_output=True, timeout=120)


def test_sequence_sweep_plot(tmp_path):
    image = pytest.importorskip("PIL.Image", reason="Pillow reads the rendering (python3-pil)")
    svg = tmp_path / "seq.svg"
    subprocess.run([BINARY, "sweep", "scenarios/default.yaml",
                    "--vary", "training.seq_len=2048,8192,32768,131072",
                    "--vary", "training.recompute=none,selective,full", "--plot", str(svg)],
                   check=True, capture_output=True, timeout=120)
    text = svg.read_text()
    # The title says what was swept, on which model and cluster.
    assert "training.seq_len x training.recompute on llama2-70b, 32 x H100-SXM5-80GB" in text
    # Peaks from ~40 GiB to ~2,800 GiB: a log axis, said on the axis.
    assert "peak memory per GPU (GiB), log scale" in text
    # Each series its own dash pattern (the first solid).
    assert len(set(re.findall(r"stroke-dasharray='\s*([^']*)'", text))) >= 2
    width, height = map(int, re.search(r'viewBox="0 0 (\d+) (\d+)"', text).groups())
    png = tmp_path / "seq.png"
    render(svg, png, width, height)
    pixels = image.open(png).convert("RGB")
    # The upper panel (peak memory), left of the legend (outside right).
    plot_w, plot_h = int(width * 0.68), height // 2
    red, purple = [], 0
    for y in range(plot_h):
        for x in range(plot_w):
            r, g, b = pixels.getpixel((x, y))
            if r > 200 and g < 60 and b < 60:
                red.append((x, y))
            if abs(r - 148) < 40 and g < 60 and b > 170:  # gnuplot's first colour, #9400d3
                purple += 1
    assert len(red) > 100, "no capacity line drawn"
    ys = [y for _, y in red]
    xs = [x for x, _ in red]
    assert max(ys) - min(ys) <= 3, f"capacity line not horizontal: rows {min(ys)}..{max(ys)}"
    assert max(xs) - min(xs) > plot_w * 0.6, "capacity line does not cross the plot"
    assert purple > 50, "the no-recompute series is hidden under selective recompute"
