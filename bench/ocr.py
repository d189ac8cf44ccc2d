"""How well and how fast OCR reads real manual pages: each page rendered to an
image with PDFium at the given resolutions, read by engine.ingest.ocr, and
compared with `pdftotext`'s text of the same page.

    python -m bench.ocr [--dpi 150 300] [--pages-per-pdf 2] [--engine tesseract] [PDF ...]

`--engine tesseract` reads the same pages with the `tesseract` program instead
(for comparison only: RAGDoll does not use it).

Character error rate (CER): edit distance between the two texts, whitespace
runs folded to one space, divided by the reference's length. Seconds count the
OCR alone (not the rendering), with onnxruntime on this machine's cores (the
parser's setting: at most 4 threads): wall time, and the process's CPU time,
which a loaded machine does not inflate as much (on an idle 2-core machine wall
time is about CPU time / 2 while both cores are busy).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_DEFAULT_PDFS = ("maint-guide.pdf", "debian-policy.pdf", "bashref.pdf", "latex-clsguide.pdf")


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, one row at a time in numpy: the insertion step's
    dependency on the row's own left neighbour is a running minimum."""
    if not a:
        return len(b)
    if not b:
        return len(a)
    bs = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    steps = np.arange(len(b) + 1)
    row = steps.copy()
    for i, ch in enumerate(a, start=1):
        cost = (bs != ord(ch)).astype(np.int64)
        candidate = np.empty(len(b) + 1, dtype=np.int64)
        candidate[0] = i
        candidate[1:] = np.minimum(row[1:] + 1, row[:-1] + cost)
        row = np.minimum.accumulate(candidate - steps) + steps
    return int(row[-1])


def fold(text: str) -> str:
    return " ".join(text.split())


def cer(*, hypothesis: str, reference: str) -> float:
    ref = fold(reference)
    return edit_distance(fold(hypothesis), ref) / max(1, len(ref))


def reference_text(pdf: Path, page: int) -> str:
    out = subprocess.run(
        ["pdftotext", "-enc", "UTF-8", "-f", str(page), "-l", str(page), str(pdf), "-"],
        capture_output=True,
        check=True,
    )
    return out.stdout.decode("utf-8", errors="replace")


def read_with_tesseract(image: object) -> tuple[str, float]:
    """Text and the CPU seconds the tesseract child used."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "page.png"
        image.save(path)  # type: ignore[attr-defined]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(
            ["tesseract", str(path), "-", "-l", "eng"], capture_output=True, check=True
        ).stdout.decode("utf-8", errors="replace")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.ocr")
    parser.add_argument("pdfs", nargs="*", type=Path)
    parser.add_argument("--dpi", type=int, nargs="+", default=[150, 300])
    parser.add_argument("--pages-per-pdf", type=int, default=2)
    parser.add_argument("--engine", choices=["rapidocr", "tesseract"], default="rapidocr")
    args = parser.parse_args(argv)
    if shutil.which("pdftotext") is None:
        print("pdftotext (poppler-utils) is the reference and is not installed")
        return 2
    import pypdfium2 as pdfium

    from engine.rag.ingest.ocr import read_image

    pdfs = args.pdfs
    if not pdfs:
        from bench.real_docs import find_real_docs

        corpus = find_real_docs()
        if corpus is None:
            print("no PDFs given and no real documents (python -m bench.real_docs)")
            return 2
        pdfs = [corpus / name for name in _DEFAULT_PDFS]
    from PIL import Image

    if args.engine == "rapidocr":
        read_image(image=Image.new("RGB", (64, 64), "white"))  # loads the model
    print("| PDF | page | dpi | CER | wall s | CPU s |")
    print("|---|---|---|---|---|---|")
    results: dict[int, list[tuple[float, float, float]]] = {dpi: [] for dpi in args.dpi}
    for pdf in pdfs:
        document = pdfium.PdfDocument(str(pdf))
        count = len(document)
        # Pages from the body, away from covers and tables of contents.
        picks = [int(count * (k + 1) / (args.pages_per_pdf + 1)) for k in range(args.pages_per_pdf)]
        for index in picks:
            reference = reference_text(pdf, index + 1)
            for dpi in args.dpi:
                image = document[index].render(scale=dpi / 72).to_pil()
                start, cpu = time.perf_counter(), time.process_time()
                if args.engine == "tesseract":
                    text, cpu = read_with_tesseract(image)
                else:
                    text = read_image(image=image).text
                    cpu = time.process_time() - cpu
                seconds = time.perf_counter() - start
                rate = cer(hypothesis=text, reference=reference)
                results[dpi].append((rate, seconds, cpu))
                print(
                    f"| {pdf.name} | {index + 1} | {dpi} | {rate:.3f} | {seconds:.1f} | {cpu:.1f} |"
                )
                sys.stdout.flush()
        document.close()
    print()
    print("| dpi | pages | median CER | mean CER | median wall s/page | median CPU s/page |")
    print("|---|---|---|---|---|---|")
    for dpi, rows in results.items():
        rates = [r for r, _, _ in rows]
        print(
            f"| {dpi} | {len(rows)} | {statistics.median(rates):.3f} "
            f"| {statistics.mean(rates):.3f} | {statistics.median(r[1] for r in rows):.1f} "
            f"| {statistics.median(r[2] for r in rows):.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
