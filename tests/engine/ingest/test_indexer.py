"""What the embedder reads for a chunk: its text under its document's and section's title."""

from __future__ import annotations

from pathlib import Path

from engine.ingest.indexer import embedding_text, readable_title


def test_a_file_name_becomes_a_readable_title() -> None:
    assert readable_title(Path("/docs/debian-reference.pdf")) == "debian reference"
    assert readable_title(Path("/docs/git_rebase.html")) == "git rebase"
    assert readable_title(Path("/docs/.hidden")) == "hidden"
    # Not UTF-8 on disk: the tokenizer must get text it can encode.
    assert readable_title(Path("/docs/caf\udce9-menu.pdf")) == "caf\ufffd menu"


def test_the_chunk_is_embedded_under_its_titles_and_keeps_its_text() -> None:
    text = "Use the -d option to download only."
    assert embedding_text(title="apt guide", section=None, text=text) == f"apt guide\n{text}"
    assert (
        embedding_text(title="apt guide", section="2 apt-get", text=text)
        == f"apt guide — 2 apt-get\n{text}"
    )
    assert embedding_text(title="", section=None, text=text) == text
