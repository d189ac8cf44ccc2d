"""A shaped answer as OpenAI's server-sent chunks: the answer's note (RAGDoll's
extension) rides on the chunk that finishes it, and on the whole response."""

from __future__ import annotations

import json

from engine.service.api.openai_answer import AnswerAsked, collect, shaped
from engine.service.api.openai_chunks import chat_chunks, completion_chunks
from engine.wire import AnswerDone, CitationsEvent, DoneEvent, TokenEvent

NOTE = "Your documents do not bear out the model's answer; below it are …"


def _tokenizer(text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
    return {"input_ids": list(range(len(text.split())))}


def _shaped(note: str | None):  # type: ignore[no-untyped-def]
    events = [
        CitationsEvent(citations=[]),
        TokenEvent(text="Restart it."),
        DoneEvent(done=AnswerDone(answer="Restart it.", mode="generative", note=note)),
    ]
    asked = AnswerAsked(question="How?", history=[], sources_in_text=False)
    return shaped(events=iter(events), asked=asked, tokenizer=_tokenizer, extractive=False)


def _lines(stream) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    return [json.loads(line[6:]) for line in stream if line != "data: [DONE]\n\n"]


def test_the_note_rides_on_the_finishing_chunk_only() -> None:
    for build in (chat_chunks, completion_chunks):
        lines = _lines(
            build(_shaped(NOTE), completion_id="x", created=0, model="m", include_usage=False)
        )
        finishing = [d for d in lines if d["choices"] and d["choices"][0]["finish_reason"]]
        assert [d.get("note") for d in finishing] == [NOTE]
        assert all("note" not in d for d in lines if d not in finishing)


def test_no_note_no_field_and_the_whole_answer_carries_it() -> None:
    lines = _lines(
        chat_chunks(_shaped(None), completion_id="x", created=0, model="m", include_usage=False)
    )
    assert all("note" not in d for d in lines)
    _, text, ended = collect(_shaped(NOTE))
    assert text == "Restart it." and ended.note == NOTE
