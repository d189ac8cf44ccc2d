"""Reading text from page images: RapidOCR (PP-OCR models run by onnxruntime;
the models ship inside the `rapidocr` wheel, nothing is downloaded).

Used by the PDF parser for pages without a usable text layer and by the image
parser. It runs in the parsing child (engine/rag/ingest/sandbox.py), under that
child's memory limit; the model is loaded on first use there, once per child.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# Pages are rendered at this resolution for OCR: measured on real manuals
# (docs/benchmarks.md), 150 dpi already reads body text; 200 dpi keeps small
# print (footnotes, tables) at a modest cost.
OCR_DPI = 200
# Larger images are scaled down to this many pixels before OCR: a 60-megapixel
# photo would otherwise need gigabytes and minutes.
MAX_OCR_PIXELS = 12_000_000
# Lines the recogniser is less sure of than this are dropped: on photos and
# noise it "reads" short strings of low confidence.
_MIN_SCORE = 0.5


@dataclass(frozen=True, kw_only=True)
class OcrLine:
    text: str
    # Box in fractions of the image (0..1), origin top left: the viewer scales
    # it to whatever size it shows the page at.
    left: float
    top: float
    right: float
    bottom: float
    score: float


@dataclass(frozen=True, kw_only=True)
class OcrPage:
    text: str  # lines in reading order, a blank line between paragraphs
    lines: tuple[OcrLine, ...]

    @property
    def mean_score(self) -> float:
        if not self.lines:
            return 0.0
        return sum(line.score for line in self.lines) / len(self.lines)


def ocr_available() -> bool:
    try:
        import rapidocr  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def _engine() -> Any:
    # One model per process (loading costs about 2 s); the parsing child
    # serves file after file.
    from rapidocr import RapidOCR

    threads = max(1, min(4, os.cpu_count() or 1))
    logging.getLogger("RapidOCR").setLevel(logging.ERROR)
    return RapidOCR(
        params={
            "Global.log_level": "error",
            "EngineConfig.onnxruntime.intra_op_num_threads": threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
    )


def read_image(*, image: Any) -> OcrPage:
    """OCR one PIL image (any mode); scaled down first when it is huge."""
    import numpy as np

    width, height = image.size
    if width * height > MAX_OCR_PIXELS:
        factor = (MAX_OCR_PIXELS / (width * height)) ** 0.5
        image = image.resize((max(1, int(width * factor)), max(1, int(height * factor))))
        width, height = image.size
    rgb = np.asarray(image.convert("RGB"))
    result = _engine()(rgb)
    boxes = result.boxes if result.boxes is not None else []
    texts = result.txts or ()
    scores = result.scores or ()
    lines: list[OcrLine] = []
    for box, text, score in zip(boxes, texts, scores, strict=False):
        text = " ".join(str(text).split())
        if not text or float(score) < _MIN_SCORE:
            continue
        xs = [float(p[0]) for p in box]
        ys = [float(p[1]) for p in box]
        lines.append(
            OcrLine(
                text=text,
                left=min(xs) / width,
                top=min(ys) / height,
                right=max(xs) / width,
                bottom=max(ys) / height,
                score=float(score),
            )
        )
    ordered = _reading_order(lines=lines)
    return OcrPage(text=_page_text(lines=ordered), lines=tuple(ordered))


def _reading_order(*, lines: list[OcrLine]) -> list[OcrLine]:
    """Top to bottom, and left to right within a row: boxes whose vertical
    middles lie within half a line height of each other are one row."""
    ordered = sorted(lines, key=lambda line: (line.top + line.bottom) / 2)
    rows: list[list[OcrLine]] = []
    for line in ordered:
        middle = (line.top + line.bottom) / 2
        if rows:
            last = rows[-1][0]
            height = last.bottom - last.top
            if abs(middle - (last.top + last.bottom) / 2) < height / 2:
                rows[-1].append(line)
                continue
        rows.append([line])
    return [line for row in rows for line in sorted(row, key=lambda line: line.left)]


def _page_text(*, lines: list[OcrLine]) -> str:
    """Rows joined by newlines; a blank line where the gap between rows is
    larger than a row's height (a paragraph or block break)."""
    out: list[str] = []
    previous: OcrLine | None = None
    for line in lines:
        if previous is not None:
            same_row = (
                abs((line.top + line.bottom) / 2 - (previous.top + previous.bottom) / 2)
                < (previous.bottom - previous.top) / 2
            )
            if same_row:
                out.append(" ")
            elif line.top - previous.bottom > (previous.bottom - previous.top):
                out.append("\n\n")
            else:
                out.append("\n")
        out.append(line.text)
        previous = line
    return "".join(out)
