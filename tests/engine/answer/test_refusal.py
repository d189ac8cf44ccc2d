"""Which question words count as never mentioned, and the bar they raise."""

from __future__ import annotations

from engine.answer.refusal import UNKNOWN_WORD_PENALTY, refused, unknown_words

PASSAGES = [
    "PostgreSQL and MySQL servers are packaged for Debian.",
    "The database listens on a local socket by default.",
]


def test_only_words_in_no_passage_and_no_chunk_are_unknown() -> None:
    asked: list[str] = []

    def holds(word: str) -> bool:
        asked.append(word)
        return word in ("set", "replicas")  # chunks outside the passages have them

    unknown = unknown_words(
        question="How do I set up replication slots and replicas in PostgreSQL servers?",
        texts=PASSAGES,
        holds=holds,
    )
    assert unknown == ["replication", "slots"]
    # Words the passages hold ("postgresql", "server" via its stem) are not looked up,
    # nor function words a full-text index drops ("how", "and", "in").
    assert asked == ["set", "replication", "slots", "replicas"]


def test_an_unknown_word_raises_the_bar_by_the_penalty() -> None:
    assert not refused(score=0.6, unknown=[], min_score=0.5)
    assert refused(score=0.6, unknown=["wireguard"], min_score=0.5)
    assert not refused(score=0.5 + UNKNOWN_WORD_PENALTY + 0.01, unknown=["vpn"], min_score=0.5)
    assert refused(score=0.4, unknown=[], min_score=0.5)
