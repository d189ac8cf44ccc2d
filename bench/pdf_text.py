"""Which PDF text extractor keeps the words: pypdf against PDFium (what the
parser uses) against poppler's `pdftotext` (when installed), on real PDFs.

    python -m bench.pdf_text [PDF or folder ...] [--limit N]

Each extractor's page texts go through the same clean-up (clean_pdf_pages) and
are cut into windows of 150 words (about one chunk). Measured per PDF:

* merged-word rate: the share of windows holding a run-together word, a word
  (8+ letters) that no two of the three extractors write, but that splits into
  words that two of them do ("maintainerscriptsare" -> maintainer scripts are);
* bigram recall: the share of pdftotext's word pairs (per page) the extractor
  also has, which falls with merged words and with a wrong reading order of
  multi-column pages;
* leftover hyphens: "deb- helper" style breaks per 1,000 words;
* pages per second of extraction plus clean-up (one process, one core).
"""

from __future__ import annotations

import argparse
import io
import itertools
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.rag.ingest.text_cleanup import clean_pdf_pages

_WORD = re.compile(r"[^\W\d_]+")
_LEFTOVER_HYPHEN = re.compile(r"[a-z]- [a-z]")
_WINDOW_WORDS = 150
_MIN_MERGED = 8


@dataclass(frozen=True, kw_only=True)
class Extraction:
    pages: list[str]
    seconds: float


@dataclass(frozen=True, kw_only=True)
class Row:
    pdf: str
    pages: int
    extractor: str
    merged_rate: float
    bigram_recall: float
    hyphens_per_1000: float
    pages_per_s: float
    examples: tuple[str, ...]


def extract_pypdf(path: Path) -> Extraction:
    from pypdf import PdfReader

    start = time.perf_counter()
    reader = PdfReader(io.BytesIO(path.read_bytes()))
    raw = []
    for page in reader.pages:
        try:
            raw.append(page.extract_text() or "")
        except Exception:  # a bad page counts as empty, as in the old parser
            raw.append("")
    pages = clean_pdf_pages(pages=raw)
    return Extraction(pages=pages, seconds=time.perf_counter() - start)


def extract_pdfium(path: Path) -> Extraction:
    from engine.rag.ingest.formats.pdf import parse_pdf

    start = time.perf_counter()
    doc = parse_pdf(path=path, data=path.read_bytes())
    return Extraction(pages=[p.text for p in doc.pages], seconds=time.perf_counter() - start)


def extract_pdftotext(path: Path) -> Extraction:
    start = time.perf_counter()
    out = subprocess.run(
        ["pdftotext", "-enc", "UTF-8", str(path), "-"], capture_output=True, check=True
    ).stdout.decode("utf-8", errors="replace")
    raw = out.split("\f")
    if raw and not raw[-1].strip():
        raw = raw[:-1]
    pages = clean_pdf_pages(pages=raw)
    return Extraction(pages=pages, seconds=time.perf_counter() - start)


EXTRACTORS: dict[str, Callable[[Path], Extraction]] = {
    "pypdf": extract_pypdf,
    "pdfium": extract_pdfium,
    "pdftotext": extract_pdftotext,
}


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def splits_into(word: str, vocabulary: set[str]) -> list[str] | None:
    """`word` as two or more vocabulary words (each 2+ letters), or None."""
    n = len(word)
    best: list[list[str] | None] = [None] * (n + 1)
    best[0] = []
    for end in range(2, n + 1):
        for start in range(max(0, end - 24), end - 1):
            prefix = best[start]
            if prefix is not None and word[start:end] in vocabulary:
                best[end] = [*prefix, word[start:end]]
                break
    found = best[n]
    return found if found is not None and len(found) >= 2 else None


def merged_words(text: str, vocabulary: set[str]) -> list[str]:
    return [
        w
        for w in words(text)
        if len(w) >= _MIN_MERGED and w not in vocabulary and splits_into(w, vocabulary)
    ]


def windows(pages: list[str]) -> list[str]:
    out: list[str] = []
    for page in pages:
        tokens = page.split()
        for i in range(0, len(tokens), _WINDOW_WORDS):
            out.append(" ".join(tokens[i : i + _WINDOW_WORDS]))
    return out


def bigrams(page: str) -> Counter[tuple[str, str]]:
    w = words(page)
    return Counter(itertools.pairwise(w))


def measure(path: Path, *, names: list[str]) -> list[Row]:
    results = {name: EXTRACTORS[name](path) for name in names}
    seen: Counter[str] = Counter()
    for extraction in results.values():
        seen.update(set(words("\n".join(extraction.pages))))
    needed = 2 if len(results) >= 3 else 1
    vocabulary = {w for w, c in seen.items() if c >= needed}
    reference = results.get("pdftotext")
    rows = []
    for name, extraction in results.items():
        chunks = [c for c in windows(extraction.pages) if c.strip()]
        merged = [merged_words(c, vocabulary) for c in chunks]
        total_words = sum(len(words(p)) for p in extraction.pages) or 1
        hyphens = sum(len(_LEFTOVER_HYPHEN.findall(p)) for p in extraction.pages)
        recall = float("nan")
        if reference is not None and len(reference.pages) == len(extraction.pages):
            hit = want = 0
            for ours, theirs in zip(extraction.pages, reference.pages, strict=True):
                mine, ref = bigrams(ours), bigrams(theirs)
                want += sum(ref.values())
                hit += sum(min(c, mine[b]) for b, c in ref.items())
            recall = hit / want if want else float("nan")
        examples = tuple(sorted({w for m in merged for w in m}, key=len, reverse=True)[:3])
        rows.append(
            Row(
                pdf=path.name,
                pages=len(extraction.pages),
                extractor=name,
                merged_rate=sum(1 for m in merged if m) / len(chunks) if chunks else 0.0,
                bigram_recall=recall,
                hyphens_per_1000=1000 * hyphens / total_words,
                pages_per_s=len(extraction.pages) / max(extraction.seconds, 1e-9),
                examples=examples,
            )
        )
    return rows


def find_pdfs(paths: list[Path], *, limit: int) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        found.extend(sorted(p.rglob("*.pdf")) if p.is_dir() else [p])
    return found[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.pdf_text")
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--limit", type=int, default=1000)
    args = parser.parse_args(argv)
    if not args.paths:
        from bench.real_docs import find_real_docs

        corpus = find_real_docs()
        if corpus is None:
            print("no PDFs given and no real documents (python -m bench.real_docs)")
            return 2
        args.paths = [corpus]
    names = ["pypdf", "pdfium"] + (["pdftotext"] if shutil.which("pdftotext") else [])
    print(
        "| PDF | pages | extractor | chunks with merged words | bigram recall "
        "| leftover hyphens /1000 words | pages/s | longest merged words |"
    )
    print("|---|---|---|---|---|---|---|---|")
    by_extractor: dict[str, list[Row]] = {n: [] for n in names}
    for pdf in find_pdfs(args.paths, limit=args.limit):
        try:
            rows = measure(pdf, names=names)
        except Exception as e:  # a PDF one extractor cannot read is reported, not fatal
            print(f"| {pdf.name} | – | failed: {type(e).__name__}: {e} |||||")
            continue
        for row in rows:
            by_extractor[row.extractor].append(row)
            print(
                f"| {row.pdf} | {row.pages} | {row.extractor} | {row.merged_rate:.1%} "
                f"| {row.bigram_recall:.3f} | {row.hyphens_per_1000:.2f} "
                f"| {row.pages_per_s:.0f} | {', '.join(row.examples)} |"
            )
        sys.stdout.flush()
    print()
    print(
        "| extractor | PDFs | mean merged rate | PDFs with >5% merged | median bigram recall "
        "| median pages/s | total pages/s |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, rows in by_extractor.items():
        if not rows:
            continue
        recalls = [r.bigram_recall for r in rows if r.bigram_recall == r.bigram_recall]
        total_pages = sum(r.pages for r in rows)
        total_s = sum(r.pages / r.pages_per_s for r in rows)
        print(
            f"| {name} | {len(rows)} | {statistics.mean(r.merged_rate for r in rows):.1%} "
            f"| {sum(1 for r in rows if r.merged_rate > 0.05)} "
            f"| {statistics.median(recalls) if recalls else float('nan'):.3f} "
            f"| {statistics.median(r.pages_per_s for r in rows):.0f} "
            f"| {total_pages / total_s:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
