"""The text a chunk is embedded as, and the hash that decides whether its vector
can be reused (engine/rag/store/records.py)."""

from __future__ import annotations

import hashlib

from engine.rag.store.records import embedded_hash, embedded_text


def test_a_chunk_is_embedded_under_its_section_title() -> None:
    assert embedded_text(section=" 5.13 Other files ", text="body") == "5.13 Other files\nbody"


def test_an_untitled_chunk_is_embedded_and_hashed_as_its_text_alone() -> None:
    # Its hash is the one stored before titles were embedded: its vector is reused.
    assert embedded_text(section="", text="body") == "body"
    assert embedded_hash(section="  ", text="body") == hashlib.sha1(b"body").hexdigest()


def test_the_hash_changes_with_the_section() -> None:
    assert embedded_hash(section="A", text="body") != embedded_hash(section="B", text="body")
    assert embedded_hash(section="A", text="body") == embedded_hash(section="A", text="body")
