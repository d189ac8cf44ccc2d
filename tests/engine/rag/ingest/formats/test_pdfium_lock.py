"""PDFium from several threads at once: the viewer's renders and the parser.

The check runs in a child process because the failure it guards against is a
segmentation fault, which would otherwise take the whole test run with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.pdf_factory import PdfPage, write_pdf

CHILD = """
import sys, threading
from pathlib import Path
from app.viewer.pdf_render import PageRequest, render_page
from engine.rag.ingest.parsers import parse_file

path = Path(sys.argv[1])
errors = []

def parse() -> None:
    try:
        for _ in range(15):
            assert parse_file(path=path).page_count == 6
    except Exception as e:
        errors.append(e)

def render(page: int) -> None:
    try:
        for _ in range(15):
            out = render_page(PageRequest(path=str(path), page=page, scale=1.5, passage="soil"))
            assert not out.error and out.found
    except Exception as e:
        errors.append(e)

threads = [threading.Thread(target=parse) for _ in range(2)]
threads += [threading.Thread(target=render, args=(p,)) for p in (1, 3, 5)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("errors:", errors)
sys.exit(1 if errors else 0)
"""


def test_parsing_and_rendering_on_several_threads_at_once_do_not_crash(tmp_path: Path) -> None:
    text = "Compost improves the structure of clay soil and feeds the worms. " * 30
    pdf = write_pdf(
        path=tmp_path / "many.pdf",
        pages=[PdfPage(heading=f"Part {n}", paragraphs=[text, text]) for n in range(6)],
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(pdf)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[5],
    )
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
