"""One real engine for the batch tests, with a few small documents indexed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.pdf_factory import PdfPage, write_pdf
from tests.support.engine import RunningEngine, running_engine

BRIDGE_FINDING = (
    "The inspection of the Alder Street bridge found corrosion on the north pylon, "
    "and the repair crew will replace four rusted bolts in October."
)
QUESTIONS = [
    "What did the inspection of the bridge find?",
    "What is the name of the lighthouse keeper's cat?",
    "How large is the budget of the community garden?",
]


def write_documents(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "lighthouse.md").write_text(
        "# Lighthouse notes\n\nThe lighthouse keeper feeds a grey cat named Biscuit "
        "every morning at seven, before the lamp is cleaned.\n"
    )
    (folder / "garden.txt").write_text(
        "The community garden project has a budget of 4,200 euros for raised beds, "
        "compost bins and a rain water tank.\n"
    )
    write_pdf(
        path=folder / "bridge report.pdf",
        pages=[
            PdfPage(
                heading="Bridge report",
                paragraphs=["This report covers the yearly inspection of the city's footbridges."],
            ),
            PdfPage(heading="Findings", paragraphs=[BRIDGE_FINDING]),
        ],
    )
    return folder


@pytest.fixture(scope="package")
def batch_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningEngine]:
    """A real engine in extractive mode (no model chosen) with the documents above."""
    root = tmp_path_factory.mktemp("batch")
    with running_engine(home=root / "home") as running:
        progress = running.ingest(write_documents(root / "documents"))
        assert progress.state == "done" and progress.files_done == 3, progress
        yield running
