"""A conversation with a language model (random weights): the next turn's prompt
starts with the last turn's, so the prefix cache serves it (the hit is asserted, not
timed); a follow-up's rewrite is a short request in the same generation batches as
answers, and what it says becomes the search query."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from engine.rag.answer.conversation import resolve
from engine.rag.answer.generative import GenerativeAnswerer
from engine.rag.answer.in_use import open_model
from engine.rag.answer.passages import Passage
from engine.rag.pipeline.adapters import generate_rows
from engine.rag.pipeline.follow_up import after_rewrite, needs_rewrite
from engine.rag.pipeline.requests import Piece, new_question
from engine.rag.pipeline.stages import DONE, GenerationJob
from engine.runtime.models.synthetic import write_random_model
from engine.wire import Citation, Turn


@pytest.fixture(scope="module")
def answerer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GenerativeAnswerer]:
    folder = write_random_model(
        folder=tmp_path_factory.mktemp("m") / "llama", hidden_size=32, num_layers=2
    )
    model = open_model(model_path=folder, device="cpu").answerer
    yield model
    model.close()


def _whole_blocks(cache: Any, request: Any) -> int:
    return (len(request.prompt_ids) - 1) // cache.block_tokens * cache.block_tokens


def _citations(passages: list[Passage]) -> list[Citation]:
    return [
        Citation(
            index=p.index, chunk_id=f"c{p.index}", path=p.path, page=p.page, text=p.text,
            score=0.5, char_start=0, char_end=len(p.text),
        )
        for p in passages
    ]  # fmt: skip


def test_the_next_turn_reuses_the_conversations_kv(answerer: GenerativeAnswerer) -> None:
    cache = answerer.prefix_cache
    assert cache is not None
    first = [Passage(index=1, text="The pump is serviced in May.", path="a.pdf", page=3)]
    answer = "".join(
        answerer.stream(question="When is the pump serviced?", passages=first, max_new_tokens=6)
    )
    turn_one = answerer.prompt_request(
        question="When is the pump serviced?", passages=first, max_new_tokens=6
    )
    before = cache.stats()
    history = [
        Turn(question="When is the pump serviced?", answer=answer, citations=_citations(first))
    ]
    second = [Passage(index=1, text="The valve is replaced every two years.", path="b.pdf", page=9)]
    "".join(
        answerer.stream(
            question="And the valve?", passages=second, max_new_tokens=4, history=history
        )
    )
    after = cache.stats()
    assert after.hits == before.hits + 1
    # At least the whole first turn's prompt came from the cache, as far as the cache keeps
    # it: in whole blocks of `block_tokens` (the last prompt token's KV comes with the
    # first generated one).
    assert after.tokens_reused - before.tokens_reused >= _whole_blocks(cache, turn_one)


def test_a_source_found_again_costs_no_new_prefill(answerer: GenerativeAnswerer) -> None:
    """A follow-up that retrieves the passage its first turn showed: the whole first
    turn comes from the cache and the passage is not prefilled again (only a
    reference to it, the answer and the question are new tokens)."""
    cache = answerer.prefix_cache
    assert cache is not None
    text = " ".join(f"Step {i}: the filter of pump {i} is rinsed and dried." for i in range(12))
    first = [Passage(index=1, text=text, path="manual.pdf", page=7)]
    question = "How is the pump filter cleaned?"
    answer = "".join(answerer.stream(question=question, passages=first, max_new_tokens=4))
    turn_one = answerer.prompt_request(question=question, passages=first, max_new_tokens=4)
    history = [Turn(question=question, answer=answer, citations=_citations(first))]
    again = [Passage(index=1, text=text, path="manual.pdf", page=7)]
    turn_two = answerer.prompt_request(
        question="And how often?", passages=again, max_new_tokens=4, history=history
    )
    before = cache.stats()
    "".join(
        answerer.stream(
            question="And how often?", passages=again, max_new_tokens=4, history=history
        )
    )
    after = cache.stats()
    reused = after.tokens_reused - before.tokens_reused
    assert after.hits == before.hits + 1
    assert reused >= _whole_blocks(cache, turn_one)
    passage_tokens = len(answerer.tokenizer(text, add_special_tokens=False)["input_ids"])
    assert len(turn_two.prompt_ids) - reused < passage_tokens / 2


def test_a_rewrite_runs_as_a_generation_row(answerer: GenerativeAnswerer) -> None:
    history = (Turn(question="How do I configure exim for IMAP?", answer="Use maildir."),)
    follow = resolve(question="does it work over POP3?", history=history)
    assert follow is not None
    request = answerer.rewrite_request(question=follow.question, history=history)
    prompt = answerer.tokenizer.decode(request.prompt_ids)
    assert "exim for IMAP" in prompt and "does it work over POP3?" in prompt
    assert request.max_new_tokens <= 48
    job = GenerationJob(
        request_id="r",
        question=new_question(text=follow.query, conversation=follow, rewrite=True),
        hits=None,
        cancel=threading.Event(),
    )
    out = list(generate_rows(answerer=answerer, jobs=[job], passages=lambda _: []))
    assert out[-1] == ("r", DONE)
    assert any(isinstance(p, Piece) and p.tokens for _, p in out)


def test_a_translation_runs_as_a_short_generation_row(answerer: GenerativeAnswerer) -> None:
    question = "Wie halte ich ein Paket auf seiner Version?"
    request = answerer.translate_request(question=question, language="en")
    prompt = answerer.tokenizer.decode(request.prompt_ids)
    assert "into English" in prompt and question in prompt
    assert request.max_new_tokens <= 64
    job = GenerationJob(
        request_id="t",
        question=new_question(text=question, translate_to="en"),
        hits=None,
        cancel=threading.Event(),
    )
    out = list(generate_rows(answerer=answerer, jobs=[job], passages=lambda _: []))
    assert out[-1] == ("t", DONE)


def test_with_a_model_the_rewrite_becomes_the_search_query() -> None:
    history = (Turn(question="How do I configure exim for IMAP?", answer="Use maildir."),)
    follow = resolve(question="does it work over POP3?", history=history)
    assert follow is not None
    assert needs_rewrite(follow_up=follow, with_model=True)
    asked = new_question(text=follow.query, conversation=follow, rewrite=True)
    searched = after_rewrite(question=asked, text="configure exim for POP3 delivery\nmore words")
    assert searched.text == "configure exim for POP3 delivery" and not searched.rewrite
    assert searched.conversation is not None and searched.conversation.rewritten_by == "model"
    assert searched.request_id == asked.request_id
    # Without a model: the history-aware query, and no rewrite.
    assert not needs_rewrite(follow_up=follow, with_model=False)
    assert "exim" in follow.context


def test_a_failed_rewrite_leaves_the_history_aware_query() -> None:
    history = (Turn(question="How do I configure exim for IMAP?", answer="Use maildir."),)
    follow = resolve(question="does it work over POP3?", history=history)
    assert follow is not None
    asked = new_question(text=follow.query, conversation=follow, rewrite=True)
    for text in (None, "", "  \n"):
        searched = after_rewrite(question=asked, text=text)
        assert searched.text == follow.query and searched.conversation == follow
        assert not searched.rewrite


def test_an_answer_read_as_the_pipeline_reads_it_is_cached(answerer: GenerativeAnswerer) -> None:
    """The generation worker stops reading a batch at its last DONE and closes it
    (engine/rag/pipeline/workers.py), before the executor's next step: the answer's KV
    reaches the cache all the same, so the next turn can reuse the prompt and the
    answer, not the prompt alone."""
    cache = answerer.prefix_cache
    assert cache is not None
    cache.clear()
    block = cache.block_tokens
    passages = [Passage(index=1, text="The pump is serviced in May.", path="a.pdf", page=3)]
    # An answer longer than a block: its KV fills a block past the prompt's last one.
    question = new_question(text="When is the pump serviced?", max_new_tokens=block + 1)
    job = GenerationJob(request_id="r", question=question, hits=None, cancel=threading.Event())
    stream = generate_rows(answerer=answerer, jobs=[job], passages=lambda _: passages)
    generated = 0
    for _, piece in stream:
        if piece is DONE:
            break  # as the worker does once every answer of its batch is complete
        generated += piece.tokens if isinstance(piece, Piece) else 0
    stream.close()
    prompt = answerer.prompt_request(
        question=question.text, passages=passages, max_new_tokens=block + 1
    ).prompt_ids
    # The prompt and the answer but its last token (never fed), in whole blocks.
    assert cache.stats().tokens_stored == (len(prompt) + generated - 1) // block * block
    assert generated == block + 1  # not cut short by a stop token
    assert cache.stats().tokens_stored > len(prompt) // block * block
