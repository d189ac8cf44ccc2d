"""One real engine process for the API tests, with a small watched folder in it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engine import RunningEngine, running_engine

GARDEN = (
    "The garden budget for this year is 4,200 euros, spent on raised beds and a "
    "rain barrel. Tomatoes need at least six hours of sun a day."
)
BEES = (
    "# Apiary\n\nThe hives are inspected every Saturday morning. The honey is "
    "extracted in late August and stored in the cellar.\n"
)


@pytest.fixture(scope="package")
def api_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningEngine]:
    root = tmp_path_factory.mktemp("api")
    notes = root / "notes"
    notes.mkdir()
    (notes / "garden.txt").write_text(GARDEN + "\n", encoding="utf-8")
    (notes / "bees.md").write_text(BEES, encoding="utf-8")
    with running_engine(home=root / "home") as running:
        assert running.ingest(notes).state == "done"
        yield running


@pytest.fixture(scope="package")
def notes_dir(api_engine: RunningEngine) -> Path:
    (folder,) = api_engine.client.folders()
    return Path(folder.path)
