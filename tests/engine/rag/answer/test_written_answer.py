"""A model's answer made final: a bare-marker answer gives way to the sources' best
sentences with a note; any other keeps its words, its markers checked, and one no passage
bears out is followed by the sources' best sentences, with a note."""

from __future__ import annotations

import numpy as np
import pytest

from engine.rag.answer.semantic_scale import SemanticScale
from engine.rag.answer.written_answer import (
    ECHO_NOTE,
    UNSUPPORTED_NOTE,
    Checking,
    finish_written,
    repeats,
)
from engine.rag.ingest.embedder import Embedder

PASSAGES = [
    "CREATE TABLE IF NOT EXISTS: if a table of the same name already exists, the "
    "statement has no effect and no error is raised.",
    "The shopt builtin toggles the values of settings controlling optional shell behavior.",
]
EXTRACT = (
    "If a table of the same name already exists, the statement has no effect and no error "
    "is raised."
)


@pytest.fixture(scope="module")
def embed():  # type: ignore[no-untyped-def]
    model = Embedder()
    return lambda texts: np.asarray(model.embed(texts))


@pytest.mark.parametrize("reply", ["[2]", "Yes, [2]", "[1], …, [2]", ""])
def test_a_bare_marker_answer_shows_the_sources_sentences_and_says_so(embed, reply: str) -> None:  # type: ignore[no-untyped-def]
    got = finish_written(answer=reply, passages=PASSAGES, embed=embed, fallback=EXTRACT)
    assert got.text == EXTRACT[:-1] + " [1]." and got.quoted_from == 0
    assert got.note is not None and "closest to the question" in got.note
    assert (reply.split(",")[0] or "nothing") in got.note


def test_an_answer_with_words_keeps_them_and_loses_a_wrong_marker(embed) -> None:  # type: ignore[no-untyped-def]
    reply = "If the table already exists, the statement does nothing and raises no error [2]."
    got = finish_written(answer=reply, passages=PASSAGES, embed=embed, fallback=EXTRACT)
    assert got.note is None
    assert got.text == reply.replace("[2]", "[1]")


def test_a_bare_answer_without_a_fallback_stays_what_it_was_less_its_markers(embed) -> None:  # type: ignore[no-untyped-def]
    got = finish_written(answer="Yes, [2]", passages=PASSAGES, embed=embed, fallback=None)
    assert got.text == "Yes," and got.note is None and got.markers.bare


UNSUPPORTED = "Restart the computer and try the installation again tomorrow morning [2]."


def test_an_answer_no_passage_bears_out_is_followed_by_the_sources_sentences(embed) -> None:  # type: ignore[no-untyped-def]
    got = finish_written(answer=UNSUPPORTED, passages=PASSAGES, embed=embed, fallback=EXTRACT)
    # The model's words stay, its wrong marker gone; what the documents say follows.
    words = UNSUPPORTED.replace(" [2]", "")
    assert got.text == f"{words}\n\n{EXTRACT[:-1]} [1]."
    assert got.note == UNSUPPORTED_NOTE and got.quoted == "after"
    assert got.text[got.quoted_from :] == f"{EXTRACT[:-1]} [1]."  # where the quotation begins
    assert got.markers.dropped == 1


def test_a_supported_answer_or_no_fallback_adds_nothing(embed) -> None:  # type: ignore[no-untyped-def]
    reply = "If the table already exists, the statement does nothing and raises no error [1]."
    supported = finish_written(answer=reply, passages=PASSAGES, embed=embed, fallback=EXTRACT)
    assert supported.text == reply and supported.quoted == "no" and supported.quoted_from is None
    alone = finish_written(answer=UNSUPPORTED, passages=PASSAGES, embed=embed, fallback=None)
    assert alone.text == UNSUPPORTED.replace(" [2]", "") and alone.note is None


def _streamed(answer: str, *, embed, step: int = 3) -> tuple[list[tuple[int, str]], str, object]:  # type: ignore[no-untyped-def]
    """(each (characters fed, text shown) along the way, the text shown at the end, the
    final answer) for `answer` written `step` characters at a time."""
    checking = Checking(passages=PASSAGES, embed=embed, fallback=EXTRACT)
    shown = []
    for at in range(0, len(answer), step):
        if text := checking.feed(answer[at : at + step]):
            shown.append((at + step, text))
    tail, final = checking.finish()
    return shown, tail, final


def test_an_answer_streams_a_checked_sentence_at_a_time_and_ends_as_checked_whole(embed) -> None:  # type: ignore[no-untyped-def]
    first = "If the table already exists, the statement does nothing and raises no error [2]. "
    second = "The shopt builtin toggles optional shell behavior settings."
    shown, tail, final = _streamed(first + second, embed=embed)
    # The first sentence's words stream up to its marker; the sentence, its marker
    # moved to the page that holds it, is whole as soon as the second begins; no raw
    # marker is ever shown.
    assert shown[0][1] == "If the"  # three words: not bare
    by_the_second = "".join(t for at, t in shown if at <= len(first) + 3)
    assert by_the_second.startswith(first.replace("[2]", "[1]"))
    assert not any("[2]" in t for at, t in shown if at <= len(first) + 3)
    assert "".join(t for _, t in shown) + tail == final.text  # type: ignore[attr-defined]
    assert final == finish_written(  # type: ignore[comparison-overlap]
        answer=first + second, passages=PASSAGES, embed=embed, fallback=EXTRACT
    )
    assert final.text.endswith(second[:-1] + " [2].")  # type: ignore[attr-defined]


@pytest.mark.parametrize("reply", ["Yes, [2]", UNSUPPORTED])
def test_a_bare_or_unsupported_answer_shows_only_checked_text_then_the_sources(
    embed, reply: str
) -> None:  # type: ignore[no-untyped-def]
    shown, tail, final = _streamed(reply, embed=embed)
    assert "".join(t for _, t in shown) + tail == final.text  # type: ignore[attr-defined]
    assert all("[2]" not in t for _, t in shown)
    assert final.text.endswith(EXTRACT[:-1] + " [1].")  # type: ignore[attr-defined]
    if reply == "Yes, [2]":
        assert shown == []  # nothing before it is known not to be bare: it is replaced


# An embedder whose cosines sit where multilingual-e5-small's do: unrelated sentences
# about 0.8, translations about 0.92 (engine/rag/answer/semantic_scale.py).
E5_LIKE = SemanticScale(unrelated=0.8, translated=0.92)
CLAIM = "The statement does nothing when the table exists already."
SAME_TOPIC = "The statement creates the table with the columns given in the list."  # says else
GERMAN = "Die Anweisung tut nichts, wenn die Tabelle schon vorhanden ist und so weiter."


def _compressed(cosines: dict[str, float]):  # type: ignore[no-untyped-def]
    """Vectors with e5's crowding: any two texts 0.8 apart, the claim `cosines[t]` from t."""
    dim = 64
    common = np.zeros(dim, dtype=np.float32)
    common[0] = 1.0
    claim_axis = np.zeros(dim, dtype=np.float32)
    claim_axis[1] = 1.0

    def vector(text: str) -> np.ndarray:
        seed = int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "little") % 2**32
        own = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
        own[:2] = 0.0
        own /= np.linalg.norm(own)
        if text == CLAIM:
            spread = claim_axis
        elif text in cosines:
            a = (cosines[text] - 0.8) / 0.2  # the share of the claim's own direction
            spread = a * claim_axis + np.sqrt(max(0.0, 1 - a * a)) * own
        else:
            spread = own
        return np.sqrt(0.8) * common + np.sqrt(0.2) * spread

    return lambda texts: np.stack([vector(t.strip()) for t in texts])


def test_a_crowded_embedder_s_cosine_is_read_on_its_scale() -> None:
    # Raw, 0.86 passes the check's bar (0.55) as every pair of e5's sentences does; on
    # e5's scale it is a sentence on the same topic saying something else.
    embed = _compressed({SAME_TOPIC: 0.86})
    answer = f"{CLAIM} [1]"
    raw = finish_written(answer=answer, passages=[SAME_TOPIC], embed=embed, fallback=None)
    assert raw.text == answer and raw.markers.kept == 1
    scaled = finish_written(
        answer=answer, passages=[SAME_TOPIC], embed=embed, fallback=None, scale=E5_LIKE
    )
    assert scaled.text == CLAIM and scaled.markers.dropped == 1


def test_a_passage_in_another_language_than_the_answer_is_read_as_a_translation() -> None:
    # 0.89 from an English claim is near a translation of it in German, and a sentence
    # saying something else in English.
    embed = _compressed({GERMAN: 0.89, SAME_TOPIC: 0.89})
    answer = f"{CLAIM} [1]"
    german = finish_written(
        answer=answer, passages=[GERMAN], embed=embed, fallback=None, scale=E5_LIKE
    )
    assert german.text == answer and german.markers.kept == 1
    english = finish_written(
        answer=answer, passages=[SAME_TOPIC], embed=embed, fallback=None, scale=E5_LIKE
    )
    assert english.markers.kept == 0


def test_an_answer_that_only_repeats_the_question_is_followed_by_the_sources(embed) -> None:  # type: ignore[no-untyped-def]
    """The real 1.5B wrote a Slovak question back as its answer, a marker after it; an
    answer that adds a word to the question is an answer."""
    question = "Does CREATE TABLE IF NOT EXISTS raise an error when the table already exists?"
    echo = "Does CREATE TABLE IF NOT EXISTS raise an error when the table already exists? [1]"
    got = finish_written(
        answer=echo, passages=PASSAGES, embed=embed, fallback=EXTRACT, question=question
    )
    assert got.note == ECHO_NOTE and got.quoted == "after"
    assert got.text[got.quoted_from :] == f"{EXTRACT[:-1]} [1]."
    answered = "No, CREATE TABLE IF NOT EXISTS raises no error when the table already exists [1]."
    got = finish_written(
        answer=answered, passages=PASSAGES, embed=embed, fallback=EXTRACT, question=question
    )
    assert got.note is None and got.text == answered
    assert repeats(question="Ako ho prestavím?", answer="Ako ho prestavím? [3]")
    japanese = "文字の大きさを枠内に収める設定はありますか？"
    assert repeats(question=japanese, answer=japanese)
    assert not repeats(question="Ako ho prestavím?", answer="Použite setupcon [3].")
    assert not repeats(question="", answer="Anything")
