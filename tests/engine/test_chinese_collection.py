"""A Chinese collection indexed by the real multilingual-e5-small answers Chinese
questions through the engine's own path: the Asymptote FAQ in Chinese (a typeset PDF of
the blind corpus, bench/blind_docs.py), its language found at ingestion, its full-text
index split into words by ICU, its sentences ended at full-width stops and scored though
they have no spaces, its runs of Chinese never taken for words the collection lacks.
Before, a Chinese question's runs read as never-mentioned words in a large collection,
and most questions were refused. The questions are this test's own, not the blind set's. Skipped
with a message where the weights or the document are absent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.blind_docs import find_blind_docs
from bench.real_e5 import find_real_e5
from engine.rag.store.fulltext import config_file, stored_config
from engine.service.core import Engine
from tests.support.folder_engine import ask, folder_engine

FILE = "asymptote-faq.zh.pdf"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    corpus, e5 = find_blind_docs(), find_real_e5()
    if corpus is None:
        pytest.skip("the blind documents are not fetched: python -m bench.blind_docs")
    if e5 is None:
        pytest.skip("multilingual-e5-small is not converted: python -m bench.real_e5")
    root = tmp_path_factory.mktemp("chinese")
    mp = pytest.MonkeyPatch()
    # Read as a large collection, where a word no chunk holds raises the bar: a run of
    # Chinese, which no chunk holds whole, refused every question there.
    mp.setattr("engine.rag.pipeline.answering.MIN_CHUNKS", 1)
    with folder_engine(root=root, files=[corpus / FILE], embedder=e5) as running:
        yield running
    mp.undo()


def test_the_file_is_chinese_and_its_words_are_broken_by_icu(engine: Engine) -> None:
    (doc,) = [d for d in engine.store.list_documents() if d.status == "indexed"]
    assert doc.languages.split(",")[0] == "zh"
    meta = engine.store.meta
    assert meta is not None
    engine.store.refresh_fulltext_index()
    config = stored_config(config_file(engine.store.folder, meta.chunks_table))
    assert config is not None and config.tokenizer == "icu/split"
    assert engine.store.holds_word("希腊字母")  # a word inside a run of Chinese


@pytest.mark.parametrize(
    ("question", "fact", "page"),
    [
        ("标注里怎么写希腊字母？", "$\\omega$", 4),
        ("想让图里的文字用 Times 字体，要加载哪个宏包？", "mathptmx", 4),
    ],
)
def test_a_chinese_question_is_answered_from_its_page(
    engine: Engine, question: str, fact: str, page: int
) -> None:
    out = ask(engine, question)
    assert "Not found in your documents" not in out["answer"]
    assert fact in out["answer"]
    assert out["citations"][0].page == page
