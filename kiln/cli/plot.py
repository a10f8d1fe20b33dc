"""Tuning-curve PNGs for ``kiln tune --plot``: matplotlib when installed, else a small built-in raster
plot (axes, grid, one coloured line per task, numeric labels) written with zlib, so the flag always works."""
from __future__ import annotations

import os
import struct
import zlib

import numpy as np

from .common import CLIError

_COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
           (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]
# 3x5 glyphs, rows top to bottom, 3 bits each (MSB = left column).
_GLYPHS = {"0": (7, 5, 5, 5, 7), "1": (2, 6, 2, 2, 7), "2": (7, 1, 7, 4, 7), "3": (7, 1, 7, 1, 7),
           "4": (5, 5, 7, 1, 1), "5": (7, 4, 7, 1, 7), "6": (7, 4, 7, 5, 7), "7": (7, 1, 1, 1, 1),
           "8": (7, 5, 7, 5, 7), "9": (7, 5, 7, 1, 7), ".": (0, 0, 0, 0, 2), "-": (0, 0, 7, 0, 0)}


def check_plot_path(path: str) -> None:
    if not path.lower().endswith(".png"):
        raise CLIError(f"--plot {path!r}: the plot is written as PNG; give a file name ending in .png")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"--plot {path!r}: the folder {folder!r} does not exist")


def save_curves(curves: list, path: str, title: str = "") -> str:
    """Write ``[(label, best FLOPS after each trial)]`` as a PNG; returns how it was drawn."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        write_png(path, render_curves([c for _, c in curves]))
        return "built-in renderer; install matplotlib for labelled axes"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, curve in curves:
        ax.plot(np.arange(1, len(curve) + 1), np.asarray(curve) / 1e9, label=label)
    ax.set_xlabel("trials")
    ax.set_ylabel("best GFLOPS")
    ax.set_title(title or "AutoTVM tuning curves")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return "matplotlib"


def _text(img: np.ndarray, x: int, y: int, text: str, scale: int = 2) -> None:
    for ch in text:
        rows = _GLYPHS.get(ch)
        if rows is not None:
            for r, bits in enumerate(rows):
                for c in range(3):
                    if bits >> (2 - c) & 1:
                        img[y + r * scale:y + (r + 1) * scale, x + c * scale:x + (c + 1) * scale] = 0
        x += 4 * scale


def _line(img: np.ndarray, x0: float, y0: float, x1: float, y1: float, color) -> None:
    n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
    xs = np.rint(np.linspace(x0, x1, n + 1)).astype(int)
    ys = np.rint(np.linspace(y0, y1, n + 1)).astype(int)
    for dy in (0, 1):  # two pixels thick
        ok = (ys + dy >= 0) & (ys + dy < img.shape[0]) & (xs >= 0) & (xs < img.shape[1])
        img[ys[ok] + dy, xs[ok]] = color


def render_curves(curves: list, width: int = 640, height: int = 400) -> np.ndarray:
    """RGB image (height, width, 3) of the curves in GFLOPS over trials."""
    img = np.full((height, width, 3), 255, np.uint8)
    left, right, top, bottom = 70, width - 20, 20, height - 40
    n_max = max([len(c) for c in curves] + [1])
    y_max = max([float(np.max(c)) / 1e9 for c in curves if len(c)] + [0.0]) or 1.0
    for k in range(5):  # grid and y labels
        y = bottom - (bottom - top) * k / 4
        img[int(y), left:right] = (225, 225, 225)
        _text(img, 6, int(y) - 5, f"{y_max * k / 4:.3g}"[:7])
    img[top:bottom + 1, left] = 0
    img[bottom, left:right + 1] = 0
    _text(img, left - 4, bottom + 10, "1")
    _text(img, right - 4 * 2 * len(str(n_max)), bottom + 10, str(n_max))
    for i, curve in enumerate(curves):
        c = np.asarray(curve, dtype=np.float64) / 1e9
        xs = left + (right - left) * (np.arange(len(c)) / max(n_max - 1, 1))
        ys = bottom - (bottom - top) * (c / y_max)
        color = _COLORS[i % len(_COLORS)]
        if len(c) == 1:
            _line(img, xs[0] - 2, ys[0], xs[0] + 2, ys[0], color)
        for j in range(len(c) - 1):
            _line(img, xs[j], ys[j], xs[j + 1], ys[j + 1], color)
    return img


def write_png(path: str, img: np.ndarray) -> None:
    """Write an RGB uint8 image as a PNG file."""
    h, w, _ = img.shape
    raw = b"".join(b"\x00" + img[r].tobytes() for r in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
