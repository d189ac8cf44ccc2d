"""Small real PDFs for per-document questions: each report states its licence on a
known page, two never mention one."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.pdf_factory import PdfPage, write_pdf

QUESTION = "Under which licence is this document distributed?"
FILLER = {
    "boiler": "The boiler pressure must stay between 1.2 and 1.5 bar while heating.",
    "garden": "Tomatoes need watering every morning in July and August.",
    "bees": "The hives are inspected every Saturday and the honey is extracted in August.",
    "roof": "The roof tiles are clay and were replaced after the storm of 2019.",
    "bread": "Knead the dough for ten minutes and let it rise for two hours.",
    "bikes": "Bicycle chains should be cleaned and oiled every three hundred kilometres.",
}
# name -> (licence sentence or None, the page it is on)
LICENCES: dict[str, tuple[str | None, int]] = {
    "boiler": ("This document is distributed under the GNU General Public Licence, version 2.", 3),
    "garden": ("This document is distributed under the Creative Commons Attribution licence.", 1),
    "bees": ("This document is distributed under the MIT licence.", 2),
    "roof": ("This document is distributed under the Apache licence, version 2.0.", 3),
    "bread": (None, 0),
    "bikes": (None, 0),
}


def write_reports(folder: Path) -> dict[str, Path]:
    """A three-page PDF per topic; returns name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, fact in FILLER.items():
        licence, on = LICENCES[name]
        pages = []
        for n in (1, 2, 3):
            paragraphs = [f"{fact} Section {n} of the {name} notes covers this in detail."]
            if licence is not None and n == on:
                paragraphs.append(licence)
            pages.append(PdfPage(heading=f"{name.title()} notes, part {n}", paragraphs=paragraphs))
        out[name] = write_pdf(path=folder / f"{name}.pdf", pages=pages, title=name)
    return out
