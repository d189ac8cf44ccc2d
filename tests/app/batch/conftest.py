"""One real engine for the batch tests, with a few small documents indexed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.small_corpus import write_small_corpus
from tests.support.engine import RunningEngine, running_engine

QUESTIONS = [
    "What did the inspection of the bridge find?",
    "What is the name of the lighthouse keeper's cat?",
    "How large is the budget of the community garden?",
]


@pytest.fixture(scope="package")
def batch_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningEngine]:
    """A real engine in extractive mode (no model chosen) with the documents above."""
    root = tmp_path_factory.mktemp("batch")
    with running_engine(home=root / "home") as running:
        progress = running.ingest(write_small_corpus(root / "documents"))
        assert progress.state == "done" and progress.files_done == 3, progress
        yield running
