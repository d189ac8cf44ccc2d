"""Fixtures the ingestion tests share: the bundled embedder, loaded once per module,
and an index on disk that writes in the foreground (no background maintenance)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.rag.ingest.embedder import Embedder
from engine.rag.store.lance_store import LanceStore


@pytest.fixture(scope="module")
def real() -> Embedder:
    return Embedder()


@pytest.fixture
def store(tmp_path: Path, real: Embedder) -> Iterator[LanceStore]:
    store = LanceStore(folder=tmp_path / "index", background=False)
    store.ensure_embedder(embedder_id=real.info.id, dimension=real.info.dimension)
    yield store
    store.close()
